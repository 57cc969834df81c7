// The anchor of the served-endpoint load test (scripts/serve-load.sh): Hummingbird 2's hello world,
// the framework's own ceiling on this machine. `GET /hello` answers "Hello, world!" (text/plain).
//
//     hello-server [PORT [LIFETIME]]     # PORT 0 (the default): a free one; LIFETIME: seconds, then stop
//
// Binds 127.0.0.1, prints "hello-server at http://127.0.0.1:PORT/" once it listens, stops on
// SIGTERM or SIGINT (or after LIFETIME seconds, the same way).
import Dispatch
import Foundation
import Hummingbird
import Logging

let args = Array(CommandLine.arguments.dropFirst())
let portArg = args.count >= 1 ? Int(args[0]) : 0
let lifetimeArg = args.count >= 2 ? Double(args[1]) : 0
guard args.count <= 2, let port = portArg, (0...65535).contains(port), let lifetime = lifetimeArg, lifetime >= 0 else {
    FileHandle.standardError.write(Data("usage: hello-server [PORT [LIFETIME-SECONDS]]\n".utf8))
    exit(2)
}

let router = Router()
router.get("hello") { _, _ -> String in "Hello, world!" }

var logger = Logger(label: "hello-server")
logger.logLevel = .warning
let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "hello-server"),
    onServerRunning: { channel in
        // Unbuffered: the script waits for this line.
        FileHandle.standardOutput.write(
            Data("hello-server at http://127.0.0.1:\(channel.localAddress?.port ?? port)/\n".utf8))
    },
    logger: logger)
if lifetime > 0 {
    // not raise(): a dispatch worker blocks SIGTERM
    DispatchQueue.global().asyncAfter(deadline: .now() + lifetime) { _ = kill(getpid(), SIGTERM) }
}
try await app.runService()
