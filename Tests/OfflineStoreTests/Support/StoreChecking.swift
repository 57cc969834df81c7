import Foundation
import Testing
@testable import OfflineStore
import Samples

/// The stores a test made; `.checksStores` runs the integrity check on all of them when the test
/// ends, so no test that writes can forget it.
final class StoreRegistry: @unchecked Sendable {
    // @unchecked: `paths` is guarded by `lock`.
    private let lock = NSLock()
    private var paths: [String] = []

    func add(_ path: String) { lock.withLock { paths.append(path) } }
    var all: [String] { lock.withLock { paths } }

    @TaskLocal static var current: StoreRegistry?

    /// Registers `path` with the running test's registry (if its suite checks stores).
    static func register(_ path: String) { current?.add(path) }
}

/// After each test: every store it registered opens and passes `check` (entity sets, indexes and
/// the request queue's invariants), or the test fails naming the problems.
struct CheckStoresTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite else { return try await function() }
        let registry = StoreRegistry()
        try await StoreRegistry.$current.withValue(registry) { try await function() }
        // Off the concurrency pool: checking a store of 150,000 items takes seconds, which the
        // tests running beside this one would wait for.
        let reports = try await offThePool { () -> [(String, String?)] in
            var reports: [(String, String?)] = []
            for path in Set(registry.all.flatMap(Self.stores(under:))).sorted() {
                let store: OfflineStore
                do {
                    store = try OfflineStore.open(at: path, readOnly: true)
                } catch let e as EntityError where "\(e)".contains("is not an OfflineStore store") {
                    continue  // a bare LMDB environment a test made, not a store
                }
                let report = try store.check()
                reports.append((path, report.isConsistent ? nil : "\(report)"))
            }
            return reports
        }
        for (path, problems) in reports {
            #expect(problems == nil, "integrity check of \(path) after \(test.name):\n\(problems ?? "")")
        }
    }
}

extension CheckStoresTrait {
    /// `dir` and the directories up to three levels below it that hold a store.
    static func stores(under dir: String) -> [String] {
        var out: [String] = []
        func visit(_ path: String, _ depth: Int) {
            if FileManager.default.fileExists(atPath: path + "/data.mdb") { out.append(path) }
            guard depth < 3, let items = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
            for item in items {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path + "/" + item, isDirectory: &isDirectory),
                    isDirectory.boolValue
                {
                    visit(path + "/" + item, depth + 1)
                }
            }
        }
        visit(dir, 0)
        return out
    }
}

extension Trait where Self == CheckStoresTrait {
    /// Runs the integrity check on every store the test registered, after the test.
    static var checksStores: Self { CheckStoresTrait() }
}

/// A new store from the built-in EPM sample schema and configuration, registered for checking.
func makeSampleStore(optimize: Bool = true, data: Bool = true, covering: Bool = false) throws -> OfflineStore {
    let path = tempDir() + "/store"
    var configuration = SampleData.configuration
    configuration.requestQueueOptimization = optimize
    if covering {
        // Covering indexes (INCLUDE) over the sets the fault tests change: every write path keeps their carried values.
        configuration.indexes["Products"] = [
            "Category, Price DESC INCLUDE Name", "SupplierID INCLUDE Name, Price, CurrencyCode",
        ]
        configuration.indexes["BusinessPartners"] = ["Country INCLUDE CompanyName", "CompanyName"]
    }
    let store = try OfflineStore.create(
        at: path, metadata: Array(SampleData.metadata.utf8), configuration: configuration)
    if data {
        for set in SampleData.setsInLoadOrder { try store.load(set: set, json: Array(SampleData.json(set).utf8)) }
    }
    StoreRegistry.register(path)
    return store
}

/// The same as `makeSampleStore(optimize:data:covering:)`, for an `async` caller (which the compiler
/// picks): made off the concurrency pool, so the tests beside this one do not wait for a thread
/// meanwhile.
func makeSampleStore(optimize: Bool = true, data: Bool = true, covering: Bool = false) async throws -> OfflineStore {
    try await offThePool { try makeSampleStore(optimize: optimize, data: data, covering: covering) }
}
