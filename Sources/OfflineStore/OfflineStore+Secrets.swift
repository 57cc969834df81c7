import Queue
import Remote
import Storage
import Sync

// Issue 37, F7 and F8: a service or token endpoint that repeats its request in an error puts the
// configured secret in the error's text. What flush and refresh throw and report, and what the
// CLI and the sidecar print, is scrubbed of every secret this process has read for them
// (`SecretForms.known`, which the queue's records are scrubbed of too).

extension OfflineStore {
    /// `text` with every form of every configured secret read so far replaced with `***`
    /// (`SecretForms`): for what the CLI and `serve` print.
    package static func redacted(_ text: String) -> String { SecretForms.known.scrub(text) }

    /// `error` with the secrets scrubbed from its text, of the same type and case when it is one
    /// that carries a service's or a token endpoint's words (`RefreshError`, `BackendError`,
    /// `AuthenticationError`, `EntityError.badInput`); any other error as it is.
    static func redacted(_ error: any Error) -> any Error {
        let forms = SecretForms.known
        guard !forms.forms.isEmpty else { return error }
        let s = forms.scrub
        switch error {
        case let e as RefreshError:
            switch e {
            case .service(let r, let status, let m):
                return RefreshError.service(request: r, status: status, message: s(m))
            case .badResponse(let r, let m): return RefreshError.badResponse(request: r, message: s(m))
            default: return e
            }
        case let e as BackendError:
            switch e {
            case .transport(let m): return BackendError.transport(s(m))
            case .unreachable(let m): return BackendError.unreachable(s(m))
            case .badResponse(let m): return BackendError.badResponse(s(m))
            case .otherOrigin(let url, let root): return BackendError.otherOrigin(url: s(url), serviceRoot: root)
            }
        case let e as AuthenticationError:
            switch e {
            case .tokenRefused(let url, let status, let m):
                return AuthenticationError.tokenRefused(tokenURL: url, status: status, message: s(m))
            case .tokenUnavailable(let url, let reason):
                return AuthenticationError.tokenUnavailable(tokenURL: url, reason: s(reason))
            case .secretUnavailable(let source, let reason):
                return AuthenticationError.secretUnavailable(source: source, reason: s(reason))
            default: return e
            }
        case EntityError.badInput(let m): return EntityError.badInput(s(m))
        default: return error
        }
    }

    /// `report` with the secrets scrubbed from why it stopped, the service's messages and the
    /// in-doubt lines.
    static func redacted(_ report: FlushReport) -> FlushReport {
        let forms = SecretForms.known
        guard !forms.forms.isEmpty else { return report }
        var out = report
        out.stopped = report.stopped.map(forms.scrub)
        out.messages = report.messages.map(forms.scrub)
        out.inDoubt = report.inDoubt.map(forms.scrub)
        return out
    }
}
