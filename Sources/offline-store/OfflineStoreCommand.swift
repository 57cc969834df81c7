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
            exit(withError: error)
        }
    }

    static let configuration = CommandConfiguration(
        commandName: "offline-store",
        abstract: "An embedded offline OData store: LMDB underneath, OData URLs on top.",
        subcommands: [
            Init.self, Load.self, Get.self, QueryCommand.self, Create.self, Update.self, Delete.self, QueueCommand.self,
            Errors.self, Undo.self, Define.self, Undefine.self, Refresh.self, FlushCommand.self, Events.self,
            Check.self, Stats.self, Generate.self, Serve.self, Demo.self, CrashTest.self, ChangeWorker.self,
            CrashWorker.self,
        ])
}
