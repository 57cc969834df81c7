import Foundation
import FuzzTargets
import Testing

/// The fuzz targets on their seeds and on the committed corpus (`Fuzz/corpus/TARGET/`, where
/// inputs that once crashed are kept): every input returns. A crash here is a regression of a
/// bug the fuzzer found. `scripts/fuzz.sh` runs the targets under libFuzzer.
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus").path

    @Test(arguments: FuzzTargets.names)
    func everyCorpusInputReturns(target: String) throws {
        var inputs = FuzzTargets.seeds()[target] ?? []
        let dir = Self.corpus + "/" + target
        for file in (try? FileManager.default.contentsOfDirectory(atPath: dir))?.sorted() ?? [] {
            inputs.append([UInt8](FileManager.default.contents(atPath: dir + "/" + file) ?? Data()))
        }
        #expect(!inputs.isEmpty)
        for input in inputs { input.withUnsafeBytes { FuzzTargets.run(target, $0) } }
    }
}
