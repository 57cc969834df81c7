import Synchronization

/// The forms in which a configured secret goes out, to be replaced with `***` in every text the
/// store records (ErrorArchive, EventLog) or prints (reports, errors, the sidecar's `$sync` answer
/// and log): a service or token endpoint that repeats its request in an error must not put the
/// secret there (issue 37, F7 and F8).
///
/// The forms of a secret `S` sent with the user (or client id) `U`:
/// - `S` itself; `S` form-encoded (`+` for a space) and percent-encoded (`%20`), with upper- and
///   lower-case hex;
/// - the base64 (standard and URL-safe, padded and not, so an answer that drops the padding is
///   caught too) of `U:S` and of `U:S` form-encoded (OAuth's `Authorization: Basic` to the token
///   URL) — the header value `Basic …` becomes `Basic ***` — and the base64 of `S` alone (raw and
///   form-encoded);
/// - each of them as JSON may escape it (`\/`, `\"`, `\\`, `\u00e4`).
///
/// The base64 of `U:S` is found only whole: a text that holds it at another alignment (inside a
/// longer base64) keeps it; the header carries it whole, which is what an echo repeats.
///
/// **Short forms**: a form shorter than `minimumLength` (4) bytes is not replaced — a 3-character
/// password would turn every "abc" of every message into `***`, and no such secret protects
/// anything. Its longer forms (the base64 of `U:S`, the header) are replaced all the same.
///
/// **Cut texts**: a text cut in the middle of a form (a message bounded to N characters) ends in
/// the form's start. An end that is the start of a form, at least `minimumLength` bytes of it,
/// at the very end of the text or before a closing `…`, is replaced too; a text that merely ends
/// as a secret begins (`… pass` for `password1`) loses that end as well.
package struct SecretForms: Sendable, Hashable {
    /// What a form becomes.
    package static let replacement = "***"
    /// The shortest form replaced, in UTF-8 bytes.
    package static let minimumLength = 4

    /// The forms, longest first, as UTF-8.
    package private(set) var forms: [[UInt8]]

    /// No secret: `scrub` returns its text.
    package init() { forms = [] }

    /// HTTP Basic: `password`, sent as `Authorization: Basic base64(user:password)`.
    package init(user: String, password: String) {
        self.init(principal: user, secret: password)
    }

    /// OAuth 2.0 client credentials: `secret`, sent to the token URL as `Authorization: Basic
    /// base64(form(clientID):form(secret))` (RFC 6749 §2.3.1).
    package init(clientID: String, secret: String) {
        self.init(principal: clientID, secret: secret)
    }

    private init(principal: String, secret: String) {
        let formS = Self.encoded(secret, form: true, lowercase: false)
        var text: Set<String> = [
            secret, formS, Self.encoded(secret, form: true, lowercase: true),
            Self.encoded(secret, form: false, lowercase: false), Self.encoded(secret, form: false, lowercase: true),
        ]
        let pairs = [
            principal + ":" + secret, Self.encoded(principal, form: true, lowercase: false) + ":" + formS,
        ]
        for source in [secret, formS] + pairs {
            let padded = Self.base64(Array(source.utf8))
            let bare = String(padded.prefix { $0 != "=" })
            let urlSafe = String(bare.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
            text.formUnion([padded, bare, urlSafe, urlSafe + padded.dropFirst(bare.count)])
        }
        var all = text
        for form in text {
            for slash in [false, true] {
                all.insert(Self.jsonEscaped(form, slash: slash, ascii: nil))
                all.insert(Self.jsonEscaped(form, slash: slash, ascii: false))
                all.insert(Self.jsonEscaped(form, slash: slash, ascii: true))
            }
        }
        forms = all.map { Array($0.utf8) }.filter { $0.count >= Self.minimumLength }.sorted {
            $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1)
        }
    }

    /// Both sets of forms.
    package func merging(_ other: SecretForms) -> SecretForms {
        var out = self
        let mine = Set(forms)
        out.forms += other.forms.filter { !mine.contains($0) }
        out.forms.sort { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
        return out
    }

    /// `text` with every form replaced with `***`, and a cut form at its end (see the type).
    package func scrub(_ text: String) -> String {
        guard !forms.isEmpty, text.utf8.count >= Self.minimumLength else { return text }
        var bytes = Array(text.utf8)
        var changed = false
        for form in forms { changed = Self.replace(form, in: &bytes) || changed }
        changed = cutEnd(&bytes) || changed
        return changed ? String(decoding: bytes, as: UTF8.self) : text
    }

    /// Replaces each occurrence of `form` in `bytes`; whether there was one.
    private static func replace(_ form: [UInt8], in bytes: inout [UInt8]) -> Bool {
        guard bytes.count >= form.count, let first = form.first else { return false }
        var out: [UInt8] = []
        var i = 0
        var found = false
        let last = bytes.count - form.count
        while i < bytes.count {
            if i <= last, bytes[i] == first, bytes[i..<i + form.count].elementsEqual(form) {
                if !found {
                    found = true
                    out.reserveCapacity(bytes.count)
                    out += bytes[0..<i]
                }
                out += replacement.utf8
                i += form.count
            } else {
                if found { out.append(bytes[i]) }
                i += 1
            }
        }
        if found { bytes = out }
        return found
    }

    /// Replaces the start of a form that ends `bytes`, or ends them before a closing `…`.
    private func cutEnd(_ bytes: inout [UInt8]) -> Bool {
        let ellipsis: [UInt8] = [0xE2, 0x80, 0xA6]
        var end = bytes.count
        if bytes.count >= ellipsis.count, bytes.suffix(ellipsis.count).elementsEqual(ellipsis) { end -= ellipsis.count }
        var longest = 0
        for form in forms where form.count > Self.minimumLength {
            for k in stride(from: min(form.count - 1, end), through: max(Self.minimumLength, longest + 1), by: -1)
            where bytes[end - k..<end].elementsEqual(form[0..<k]) {
                longest = k
                break
            }
        }
        guard longest > 0 else { return false }
        bytes.replaceSubrange(end - longest..<end, with: Self.replacement.utf8)
        return true
    }

    // MARK: Encodings

    /// `value` percent-encoded: RFC 6749 Appendix B's form encoding (`+` for a space; `*` kept),
    /// or RFC 3986's (`%20`; `~` kept).
    static func encoded(_ value: String, form: Bool, lowercase: Bool) -> String {
        let hex = Array((lowercase ? "0123456789abcdef" : "0123456789ABCDEF").utf8)
        var out: [UInt8] = []
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                out.append(byte)
            case UInt8(ascii: "*") where form, UInt8(ascii: "~") where !form: out.append(byte)
            case UInt8(ascii: " ") where form: out.append(UInt8(ascii: "+"))
            default: out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Standard base64, padded.
    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = UInt32(bytes[i]), b1 = n > 1 ? UInt32(bytes[i + 1]) : 0, b2 = n > 2 ? UInt32(bytes[i + 2]) : 0
            let v = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(n > 1 ? alphabet[Int(v >> 6 & 63)] : UInt8(ascii: "="))
            out.append(n > 2 ? alphabet[Int(v & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` as a JSON string's contents: `"` and `\` escaped, control characters as `\u00XX`;
    /// with `slash`, `/` as `\/`; with `ascii`, every other non-ASCII scalar as `\uXXXX` (UTF-16,
    /// lower- or upper-case hex).
    static func jsonEscaped(_ value: String, slash: Bool, ascii: Bool?) -> String {
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/" where slash: out += "\\/"
            default:
                if scalar.value < 0x20 || (ascii != nil && scalar.value > 0x7E) {
                    for unit in String(scalar).utf16 {
                        let hex = String(unit, radix: 16, uppercase: ascii == true)
                        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}

extension SecretForms {
    /// The secrets this process has read for a flush or refresh (`register`), the last
    /// `registrySize` of them: what the queue's records (ErrorArchive, EventLog) and what the
    /// store prints are scrubbed of. The texts are written by layers that never see the
    /// configuration (flush, refresh, the OData dialects); a secret of one store scrubbed from
    /// another store of the same process costs nothing.
    package static var known: SecretForms { registry.withLock { $0.merged } }

    /// How many secrets `known` keeps (a rotated secret file brings a new one each read).
    package static let registrySize = 16

    /// Adds `forms` to `known`.
    package static func register(_ forms: SecretForms) {
        guard !forms.forms.isEmpty else { return }
        registry.withLock { r in
            guard !r.list.contains(forms) else { return }
            r.list.append(forms)
            if r.list.count > registrySize { r.list.removeFirst(r.list.count - registrySize) }
            r.merged = r.list.reduce(SecretForms()) { $0.merging($1) }
        }
    }

    private static let registry = Mutex<(list: [SecretForms], merged: SecretForms)>(([], SecretForms()))
}
