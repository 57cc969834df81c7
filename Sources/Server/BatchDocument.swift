import Storage

/// The JSON `$batch` reader on its own, for the fuzzer: parses and checks a batch document as
/// `serve` does before running any of it. Returns the number of requests.
package enum BatchDocument {
    package static func parse(_ bytes: [UInt8]) throws -> Int {
        try Batch.parse(try JSON.parse(bytes)).count
    }
}
