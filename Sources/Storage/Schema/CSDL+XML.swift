import LMDB
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One XML element of a CSDL document: local name, attributes (by qualified name), children, line.
struct CSDLNode: Sendable {
    var name: String
    var attributes: [String: String]
    var children: [CSDLNode] = []
    var line: Int?

    /// The value of an unprefixed attribute.
    subscript(_ attribute: String) -> String? { attributes[attribute] }

    /// The value of an attribute by local name, whatever its prefix.
    func attribute(local: String) -> String? {
        if let plain = attributes[local] { return plain }
        let suffix = ":" + local
        return attributes.first { $0.key.hasSuffix(suffix) }?.value
    }

    /// The child elements with the given local name, in document order.
    func children(_ name: String) -> [CSDLNode] { children.filter { $0.name == name } }

    func child(_ name: String) -> CSDLNode? { children.first { $0.name == name } }

    /// `Kind 'Name'`, for error messages.
    var label: String {
        if let n = attributes["Name"] { return "\(name) '\(n)'" }
        return name
    }

    /// Builds an element tree from XML bytes.
    static func parse(_ bytes: [UInt8]) throws(CSDLError) -> CSDLNode {
        guard !bytes.isEmpty else { throw CSDLError("not an XML document: empty input") }
        let parser = XMLParser(data: Data(withProcessingInstructionData(try utf8Document(bytes))))
        parser.shouldProcessNamespaces = false
        parser.shouldReportNamespacePrefixes = false
        parser.shouldResolveExternalEntities = false
        let builder = TreeBuilder()
        parser.delegate = builder
        _ = parser.parse()
        let line = builder.errorLine ?? (parser.lineNumber > 0 ? parser.lineNumber : nil)
        var codes = builder.errorCodes
        if let code = (parser.parserError as NSError?)?.code { codes.append(code) }
        if builder.tooDeep {
            throw CSDLError("elements nested deeper than \(TreeBuilder.maxDepth) levels", line: line)
        }
        // An undeclared namespace prefix does not stop libxml2; the document is still well-formed XML.
        if let code = codes.first(where: { $0 != undeclaredPrefix }) {
            throw CSDLError("malformed XML (\(describe(code)))", line: line)
        }
        guard let root = builder.root, builder.stack.isEmpty else {
            throw CSDLError("malformed XML (\(codes.first.map(describe) ?? "incomplete document"))", line: line)
        }
        return root
    }

    private static let undeclaredPrefix = 201

    /// The document as UTF-8 that libxml2 reads as UTF-8: XMLParser traps on names that are not UTF-8,
    /// so Latin-1 is transcoded here, other encoding declarations are blanked and invalid UTF-8 rejected.
    static func utf8Document(_ bytes: [UInt8]) throws(CSDLError) -> [UInt8] {
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        let head = bytes[start..<min(bytes.count, start + 1024)]
        guard head.starts(with: Array("<?xml".utf8)),
            let close = head.indices.first(where: { bytes[$0...].starts(with: [0x3F, 0x3E]) })
        else {
            guard isUTF8(bytes) else { throw CSDLError("not an XML document: not valid UTF-8") }
            return bytes
        }
        let end = close + 2
        let declaration = String(decoding: bytes[start..<end], as: UTF8.self).lowercased()
        var encoding = ""
        if let key = declaration.range(of: "encoding") {
            encoding = String(
                declaration[key.upperBound...].drop { " =\"'\t\r\n".contains($0) }
                    .prefix { $0.isLetter || $0.isNumber || "-_.:".contains($0) })
        }
        guard !encoding.isEmpty, encoding != "utf-8", encoding != "utf8" else {
            guard isUTF8(bytes) else { throw CSDLError("not an XML document: not valid UTF-8") }
            return bytes
        }
        // Blank the declaration (keeping line breaks) so that libxml2 reads the rest as UTF-8.
        var document = bytes[..<end].enumerated().map { $0.offset < start || $0.element == 0x0A ? $0.element : 0x20 }
        let latin1: Set<String> = ["iso-8859-1", "iso_8859-1", "iso8859-1", "latin1", "latin-1", "l1"]
        if latin1.contains(encoding), !isUTF8(bytes) {
            document += String(String.UnicodeScalarView(bytes[end...].map { Unicode.Scalar($0) })).utf8
        } else {
            document += bytes[end...]
        }
        guard isUTF8(document) else { throw CSDLError("not an XML document: not valid UTF-8") }
        return document
    }

    /// The document with a space before the `?>` of every processing instruction that has a
    /// target and no data (`<?target?>` → `<?target ?>`): libxml2 reports such an instruction's data
    /// as NULL, and XMLParser reads that pointer as a C string — a segfault (found by fuzzing,
    /// `Fuzz/corpus/csdl/processing-instruction-without-data`). With the space the data is "".
    /// Processing instructions mean nothing in CSDL; line numbers are unchanged.
    static func withProcessingInstructionData(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            out.append(bytes[i])
            guard bytes[i] == 0x3C, i + 1 < bytes.count, bytes[i + 1] == 0x3F else { i += 1; continue }
            // "<?": copy the target, then add a space if "?>" follows it directly.
            out.append(0x3F)
            var j = i + 2
            while j < bytes.count, ![0x20, 0x09, 0x0D, 0x0A, 0x3F, 0x3C, 0x3E].contains(bytes[j]) {
                out.append(bytes[j]); j += 1
            }
            if j > i + 2, j + 1 < bytes.count, bytes[j] == 0x3F, bytes[j + 1] == 0x3E { out.append(0x20) }
            i = j
        }
        return out
    }

    static func isUTF8(_ bytes: [UInt8]) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// A short description of a libxml2 error code as reported by XMLParser.
    private static func describe(_ code: Int) -> String {
        switch code {
        case 4: "document is empty"
        case 5: "extra content at the end of the document"
        case 9: "invalid character"
        case 26: "undeclared entity"
        case 41: "attribute without value"
        case 42: "duplicate attribute"
        case 68: "name expected"
        case 73: "'>' expected"
        case 76: "mismatched end tag"
        case 77: "unfinished tag"
        case 89: "entity reference loop"
        case undeclaredPrefix: "undeclared namespace prefix"
        default: "XMLParser error \(code)"
        }
    }
}

/// XMLParser delegate that assembles `CSDLNode`s on a stack.
private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [CSDLNode] = []
    var root: CSDLNode?
    var errorCodes: [Int] = []
    var errorLine: Int?
    var tooDeep = false
    /// Deeper trees are refused: CSDL needs a few levels, and dropping a deep tree recurses.
    static let maxDepth = 256

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
        qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
    ) {
        let local = elementName.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init)
        guard stack.count < Self.maxDepth else {
            tooDeep = true
            parser.abortParsing()
            return
        }
        let line = parser.lineNumber > 0 ? parser.lineNumber : nil
        stack.append(CSDLNode(name: local ?? elementName, attributes: attributeDict, line: line))
    }

    func parser(
        _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
        qualifiedName qName: String?
    ) {
        guard !tooDeep, let node = stack.popLast() else { return }
        if stack.isEmpty {
            if root == nil { root = node }
        } else {
            stack[stack.count - 1].children.append(node)
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        errorCodes.append((parseError as NSError).code)
        if errorLine == nil, parser.lineNumber > 0 { errorLine = parser.lineNumber }
    }
}
