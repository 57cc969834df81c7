import Foundation

/// The repository's root directory: the nearest directory above this file that holds
/// `Package.swift`. Found by walking up, so moving a test file between folders cannot point a test
/// at a directory that does not exist.
let repositoryRoot: String = {
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while dir.path != "/" {
        if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir.path }
        dir = dir.deletingLastPathComponent()
    }
    preconditionFailure("no Package.swift above \(#filePath)")
}()
