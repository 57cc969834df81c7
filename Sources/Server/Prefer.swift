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
            let item = part.split(separator: ";")[0]
            let kv = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            switch kv[0].lowercased() {
            case "odata.maxpagesize", "maxpagesize":
                if kv.count == 2, let n = Int(kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), n > 0 { maxPageSize = n }
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
