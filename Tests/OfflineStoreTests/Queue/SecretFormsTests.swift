import TestSupport
import Foundation
import Testing
@testable import Queue

/// `SecretForms` (issue 37, F7 and F8): every form in which a secret is sent is replaced with
/// `***`, a form shorter than 4 bytes is not, and a text cut inside a form loses the form's start.
@Suite(.runsOffThePool) struct SecretFormsTests {
    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    @Test func everyFormIsReplaced() {
        let secret = "s3cr+t/=&p ä"
        let basic = SecretForms(user: "u", password: secret)
        let oauth = SecretForms(clientID: "client id", secret: secret)
        let form = "s3cr%2Bt%2F%3D%26p+%C3%A4"
        let sent: [(SecretForms, String)] = [
            (basic, secret), (basic, form), (basic, form.lowercased()), (basic, "s3cr%2Bt%2F%3D%26p%20%C3%A4"),
            (basic, Self.base64("u:" + secret)), (basic, "Basic " + Self.base64("u:" + secret)),
            (basic, Self.base64(secret)), (basic, "s3cr+t\\/=&p \\u00e4"), (basic, "s3cr+t/=&p \\u00E4"),
            (oauth, Self.base64("client+id:" + form)), (oauth, Self.base64(form)), (oauth, secret),
        ]
        for (forms, text) in sent {
            let scrubbed = forms.scrub("before \(text) after")
            #expect(scrubbed == "before *** after" || scrubbed == "before Basic *** after", "\(text): \(scrubbed)")
        }
        #expect(basic.scrub("user u, nothing secret") == "user u, nothing secret")
        let merged = SecretForms(user: "a", password: "first secret").merging(
            SecretForms(user: "b", password: "2nd-one"))
        #expect(merged.scrub("first secret, 2nd-one") == "***, ***")
    }

    @Test func shortFormsAreKept() {
        let forms = SecretForms(user: "user", password: "abc")
        #expect(forms.scrub("abc abcd") == "abc abcd")
        #expect(forms.scrub("Basic " + Self.base64("user:abc")) == "Basic ***")
    }

    @Test func aCutFormLosesItsStart() {
        let forms = SecretForms(user: "user", password: "hunter2-long")
        #expect(forms.scrub("said: hunter2-l") == "said: ***")
        #expect(forms.scrub("said: hunter2-l…") == "said: ***…")
        #expect(forms.scrub("said: hun") == "said: hun")  // under 4 bytes: not a secret's start
        #expect(forms.scrub("said: hunter2-long, then more") == "said: ***, then more")
    }
}
