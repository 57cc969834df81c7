import LMDB
import ArgumentParser
import Foundation
import CommandSupport
import CrashHarness
import Demo
import OfflineStore

@main
struct OfflineStoreCommand: ParsableCommand {
    static func main() {
        // Started with a standard descriptor closed, the tool's own files must not take it.
        do { try StandardDescriptors.reserve() } catch { Output.note(Output.errorLine(error)); Foundation.exit(1) }
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            // Help, `help VERB`, a completion script: text for standard output that must arrive
            // there (to /dev/full or a closed pipe it is an error, not a silent exit 0).
            if exitCode(for: error) == .success {
                let text = fullMessage(for: error)
                do {
                    if !text.isEmpty { try Output.write(text.hasSuffix("\n") ? text : text + "\n", to: 1) }
                } catch {
                    Output.note(Output.errorLine(error))
                    Foundation.exit(1)
                }
                Foundation.exit(0)
            }
            exit(withError: error)
        }
    }

    static let configuration = CommandConfiguration(
        commandName: "offline-store",
        abstract: "An embedded offline OData store: LMDB underneath, OData URLs on top.",
        subcommands: [
            Init.self, Load.self, Get.self, StreamCommand.self, QueryCommand.self, Create.self, Update.self,
            Delete.self, Call.self, QueueCommand.self,
            Errors.self, Undo.self, Define.self, Undefine.self, Refresh.self, FlushCommand.self, Events.self,
            Check.self, Migrate.self, Stats.self, Generate.self, SampleCommand.self, Serve.self, Demo.self,
            CrashTest.self,
            ChangeWorker.self,
            CrashWorker.self,
        ])
}
