import Foundation
import FuzzTargets

#if FUZZING
/// Built with `-sanitize=fuzzer` (scripts/fuzz.sh): libFuzzer's own `main` calls this for every
/// input; `FUZZ_TARGET` names the target (url, row, json, csdl, batch).
enum Fuzzing {
    static let target = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? "url"
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzTargets.run(Fuzzing.target, UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
/// A plain build replays inputs — `offline-store-fuzz TARGET FILE...` (a crash the fuzzer found,
/// reproduced without the sanitizer) — or writes the seed corpus: `--write-seeds DIR`.
@main
struct FuzzDriver {
    static func main() throws {
        let args = CommandLine.arguments.dropFirst()
        if args.first == "--write-seeds", let dir = args.dropFirst().first {
            for (name, inputs) in FuzzTargets.seeds() {
                try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
                for (i, input) in inputs.enumerated() {
                    _ = FileManager.default.createFile(atPath: dir + "/\(name)/seed-\(i)", contents: Data(input))
                }
            }
            return
        }
        guard let name = args.first, FuzzTargets.names.contains(name) else {
            FileHandle.standardError.write(Data("usage: offline-store-fuzz \(FuzzTargets.names.joined(separator: "|")) FILE... | --write-seeds DIR\n".utf8))
            exit(2)
        }
        for path in args.dropFirst() {
            let bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
            bytes.withUnsafeBytes { FuzzTargets.run(name, $0) }
            print("ok \(path)")
        }
    }
}
#endif
