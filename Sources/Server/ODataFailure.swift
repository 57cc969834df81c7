import LMDB
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import OfflineStore
import Query
import Served
import Storage

/// An error as an OData JSON error response: `{"error":{"code","message","target","details"}}`.
///
/// Every error a request can meet comes through `init(_:)`, which picks the status: bad input
/// (URL, JSON, values that do not fit the schema) 400, a missing entity or set 404, a taken key
/// 409, a failed `If-Match` 412, a full disk 507; anything else is the server's fault, 500.
struct ODataFailure: Error, CustomStringConvertible {
    var status: HTTPResponse.Status
    var code: String
    var message: String
    var target: String?
    var headers = HTTPFields()

    init(_ status: HTTPResponse.Status, _ message: String, code: String? = nil, target: String? = nil) {
        self.status = status
        self.message = message
        self.code = code ?? Self.code(for: status)
        self.target = target
    }

    static func methodNotAllowed(_ method: HTTPRequest.Method, _ what: String, allow: String) -> ODataFailure {
        var f = ODataFailure(.methodNotAllowed, "\(method.rawValue) is not allowed on \(what); allowed: \(allow)")
        f.headers[.allow] = allow
        return f
    }

    init(_ error: any Error) {
        switch error {
        case let f as ODataFailure:
            self = f
        case let e as QueryError where e.namesMissingResource:
            self.init(.notFound, e.description, code: "NotFound", target: "resource path")
        case let e as QueryError:
            self.init(.badRequest, e.description, code: "InvalidQuery", target: e.option ?? "resource path")
        case let e as JSONError:
            self.init(.badRequest, e.description, code: "InvalidJSON")
        case let e as EntityError:
            self.init(Self.status(of: e), e.description, code: Self.entityCode(e))
        case let e as ServedError:
            self.init(Self.status(of: e), e.description)
        case let e as ChangeTokenError:
            self.init(.gone, e.description, target: "$deltatoken")
        case let e as EnvironmentError:
            switch e {
            case .diskFull, .sizeCapReached:
                self.init(.init(code: 507, reasonPhrase: "Insufficient Storage"), e.description)
            default: self.init(.internalServerError, e.description)
            }
        case let e as HTTPParserError:
            // A malformed request (a bad chunk size, a chunk without its CRLF, …): the client's
            // fault. The parser cannot go on, so the connection closes after this answer.
            self.init(.badRequest, "malformed HTTP request: \(e)", code: "MalformedRequest")
            headers[.connection] = "close"
        case let e as any HTTPResponseError:
            self.init(e.status, "\(e)")
        default:
            self.init(.internalServerError, String(describing: error))
        }
    }

    var description: String { "\(status.code) \(code): \(message)" }

    static func status(of e: EntityError) -> HTTPResponse.Status {
        switch e {
        case .notFound, .unknownEntitySet: .notFound
        case .duplicateKey, .uniqueViolation: .conflict
        case .corruptRow: .internalServerError
        default: .badRequest
        }
    }

    static func status(of e: ServedError) -> HTTPResponse.Status {
        switch e {
        case .notFound: .notFound
        case .alreadyExists: .conflict
        case .preconditionFailed: .preconditionFailed
        case .repeatMismatch: .unprocessableContent
        case .badRepeatabilityID: .badRequest
        }
    }

    static func entityCode(_ e: EntityError) -> String {
        switch e {
        case .notFound: "NotFound"
        case .unknownEntitySet: "UnknownEntitySet"
        case .unknownProperty: "UnknownProperty"
        case .duplicateKey: "DuplicateKey"
        case .uniqueViolation: "UniqueViolation"
        case .typeMismatch, .outOfRange, .tooLong, .nullNotAllowed: "InvalidValue"
        case .missingKey, .keyTooLong, .badKeyPredicate, .keyChange: "InvalidKey"
        default: "BadRequest"
        }
    }

    static func code(for status: HTTPResponse.Status) -> String {
        switch status.code {
        case 400: "BadRequest"
        case 404: "NotFound"
        case 405: "MethodNotAllowed"
        case 406: "NotAcceptable"
        case 409: "Conflict"
        case 412: "PreconditionFailed"
        case 413: "PayloadTooLarge"
        case 410: "Gone"
        case 415: "UnsupportedMediaType"
        case 422: "UnprocessableContent"
        case 424: "FailedDependency"
        case 501: "NotImplemented"
        case 507: "InsufficientStorage"
        default: status.code >= 500 ? "InternalError" : "Error"
        }
    }

    /// The error object, `{"error":{…}}`.
    var json: [UInt8] {
        var out = JSONBuffer()
        out.append("{\"error\":{\"code\":")
        out.appendString(code)
        out.append(",\"message\":")
        out.appendString(message)
        if let target { out.append(",\"target\":"); out.appendString(target) }
        out.append(",\"details\":[]}}")
        return out.bytes
    }

    var response: Response {
        Response.json(json, status: status, headers: headers)
    }
}

extension QueryError {
    /// Whether the error says the resource path names nothing: an unknown entity set, or an
    /// unknown navigation property after an entity. The path is well formed but its resource does
    /// not exist, which is 404 (as for a write to the same path), not 400. Errors of query options
    /// (`$expand=Nope`) stay 400.
    var namesMissingResource: Bool {
        option == nil && (message.hasPrefix("unknown entity set ") || message.hasPrefix("unknown navigation property "))
    }
}
