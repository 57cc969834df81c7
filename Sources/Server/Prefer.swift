import Foundation

/// The preferences of a `Prefer` header (RFC 7240) that this service honours.
struct Prefer {
    var maxPageSize: Int?
    var trackChanges = false
    /// `return=minimal` (204 without a body) or `return=representation` (the entity in the body).
    var returnRepresentation: Bool?

    init(_ header: String?) {
        guard let header else { return }
        for part in header.split(separator: ",") {
            // Not omitting empty pieces: `=`, `;` and `;x` split into at least one (empty) piece,
            // where omitting them left none to look at (a crash of the server on one header).
            let item = part.split(separator: ";", omittingEmptySubsequences: false)[0]
            let kv = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            switch kv[0].lowercased() {
            case "odata.maxpagesize", "maxpagesize":
                if kv.count == 2, let n = Int(kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), n > 0 {
                    maxPageSize = n
                }
            case "odata.track-changes", "track-changes":
                trackChanges = true
            case "return":
                if kv.count == 2 { returnRepresentation = kv[1].lowercased() == "representation" }
            default:
                break
            }
        }
    }
}
