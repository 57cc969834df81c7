import Foundation
import FuzzTargets
#if FUZZING
import CLibFuzzer
#endif

/// `offline-store-fuzz`. The fuzzing build (scripts/fuzz.sh, `-D FUZZING`) runs libFuzzer:
/// `FUZZ_TARGET=url offline-store-fuzz [libFuzzer flags] CORPUS_DIR...`, or replays inputs given as
/// files. A plain build replays inputs too — `offline-store-fuzz TARGET FILE...` (a crash the
/// fuzzer found, reproduced without it). Both write the seed corpus: `--write-seeds DIR`.
///
/// Why the program keeps its own `main` and calls `LLVMFuzzerRunDriver`: SwiftPM compiles an
/// executable target with `-entry-point-function-name <module>_main` and links it with
/// `--defsym main=<module>_main`, so a driver without `@main` does not link (the symbol is
/// undefined), and one with `@main` collides with the `main` of libFuzzer's usual runtime
/// (`-sanitize=fuzzer` at link time). So scripts/fuzz.sh instruments the compile only
/// (`-Xfrontend -sanitize=fuzzer`: inline 8-bit counters, PC tables, comparison tracing) and links
/// `libclang_rt.fuzzer_no_main`, libFuzzer without its `main`; this `main` hands it the arguments.
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
        #if FUZZING
        guard let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"], FuzzTargets.names.contains(name) else {
            FileHandle.standardError.write(
                Data("FUZZ_TARGET must name a target: \(FuzzTargets.names.joined(separator: ", "))\n".utf8))
            exit(2)
        }
        Fuzzing.target = name
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(
            LLVMFuzzerRunDriver(&argc, &argv) { data, size in
                FuzzTargets.run(Fuzzing.target, UnsafeRawBufferPointer(start: data, count: size))
                return 0
            })
        #else
        guard let name = args.first, FuzzTargets.names.contains(name) else {
            FileHandle.standardError.write(
                Data(
                    "usage: offline-store-fuzz \(FuzzTargets.names.joined(separator: "|")) FILE... | --write-seeds DIR\n"
                        .utf8))
            exit(2)
        }
        for path in args.dropFirst() {
            let bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
            bytes.withUnsafeBytes { FuzzTargets.run(name, $0) }
            print("ok \(path)")
        }
        #endif
    }
}

#if FUZZING
/// The target libFuzzer's callback runs: set once, before the driver starts, from `FUZZ_TARGET`.
enum Fuzzing {
    nonisolated(unsafe) static var target = ""
}
#endif
