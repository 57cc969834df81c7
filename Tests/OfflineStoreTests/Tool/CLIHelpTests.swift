import TestSupport
import ArgumentParser
import Foundation
import Testing
@testable import offline_store

/// `offline-store help <verb>` shows an example for every verb a user sees, the example parses
/// with the verb's real options, and the shell completion script generates.
@Suite(.runsOffThePool) struct CLIHelpTests {
    /// The verbs `offline-store --help` lists (hidden ones, the crash test's workers, left out).
    static let verbs: [ParsableCommand.Type] = OfflineStoreCommand.configuration.subcommands.filter {
        $0.configuration.shouldDisplay
    }

    static func name(_ verb: ParsableCommand.Type) -> String {
        verb.configuration.commandName ?? verb._commandName
    }

    /// The example lines of a verb's discussion: `Example: offline-store <verb> …`, one a line.
    static func examples(_ verb: ParsableCommand.Type) -> [String] {
        let prefix = "Example: offline-store \(name(verb)) "
        return verb.configuration.discussion.split(separator: "\n").compactMap { line in
            let l = line.trimmingCharacters(in: .whitespaces)
            return l.hasPrefix(prefix) ? String(l.dropFirst("Example: ".count)) : nil
        }
    }

    @Test func everyVisibleVerbIsChecked() {
        // The list is the tool's own: a new verb is checked without touching this test.
        #expect(Self.verbs.count >= 20)
        #expect(!Self.verbs.contains { Self.name($0).hasPrefix("_") })
    }

    @Test(arguments: CLIHelpTests.verbs.map(CLIHelpTests.name))
    func helpShowsAnExample(verb: String) throws {
        let r = try CLI.run(["help", verb])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(
            lines.contains { $0.hasPrefix("Example: offline-store \(verb) ") },
            "offline-store help \(verb) has no 'Example: offline-store \(verb) …' line:\n\(r.stdout)")
    }

    /// Each example is what the tool accepts: its arguments parse as the verb with its real options.
    @Test(arguments: CLIHelpTests.verbs.map(CLIHelpTests.name))
    func exampleParses(verb: String) throws {
        let type = try #require(Self.verbs.first { Self.name($0) == verb })
        let examples = Self.examples(type)
        #expect(!examples.isEmpty, "no example in the discussion of \(verb)")
        for example in examples {
            let words = try shellWords(example)
            #expect(words.first == "offline-store")
            let parsed = try OfflineStoreCommand.parseAsRoot(Array(words.dropFirst()))
            #expect(Swift.type(of: parsed) == type, "\(example) parses as \(Swift.type(of: parsed))")
        }
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScriptGenerates(shell: String) throws {
        let r = try CLI.run(["--generate-completion-script", shell])
        #expect(r.status == 0, "\(r.stderr)")
        // Every visible verb is completed; the hidden workers are not offered.
        for verb in Self.verbs.map(Self.name) { #expect(r.stdout.contains(verb), "\(shell) completion lacks \(verb)") }
        #expect(!r.stdout.contains("_crash-worker"))
        if shell == "bash" { #expect(r.stdout.contains("complete -o filenames -F _offline-store offline-store")) }
    }

    @Test func shellWordsSplitsAsTheShellDoes() throws {
        #expect(try shellWords(#"a 'b c' "d \"e\"" 'f'\''g' h\ i"#) == ["a", "b c", #"d "e""#, "f'g", "h i"])
        #expect(throws: (any Error).self) { try shellWords("a 'b") }
        #expect(try shellWords(#"q "S?\$filter=A eq 'x'" 'S?$top=1'"#) == ["q", "S?$filter=A eq 'x'", "S?$top=1"])
        #expect(throws: (any Error).self) { try shellWords(#"q "S?$filter=A eq 'x'""#) }
    }
}

/// Splits a command line as a POSIX shell does for quotes and backslashes. A `$` the shell would
/// expand outside single quotes (`"Set?$filter=…"` loses `$filter`) is an error: write `\$`.
func shellWords(_ line: String) throws -> [String] {
    struct Unterminated: Error {}
    struct Expands: Error { var at: String }
    var words: [String] = [], word = "", inWord = false
    var chars = line.makeIterator()
    while let c = chars.next() {
        switch c {
        case " ", "\t":
            if inWord { words.append(word); word = ""; inWord = false }
        case "'":
            inWord = true
            while true {
                guard let d = chars.next() else { throw Unterminated() }
                if d == "'" { break }
                word.append(d)
            }
        case "\"":
            inWord = true
            while true {
                guard let d = chars.next() else { throw Unterminated() }
                if d == "\"" { break }
                if d == "\\" {
                    guard let e = chars.next() else { throw Unterminated() }
                    if !"\"\\$`".contains(e) { word.append("\\") }
                    word.append(e)
                } else {
                    if d == "$" { throw Expands(at: word) }
                    word.append(d)
                }
            }
        case "\\":
            guard let d = chars.next() else { throw Unterminated() }
            inWord = true
            word.append(d)
        case "$":
            throw Expands(at: word)
        default:
            inWord = true
            word.append(c)
        }
    }
    if inWord { words.append(word) }
    return words
}
