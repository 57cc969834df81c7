// The modules whose public values the facade hands out are re-exported, not only named by the
// typealiases below: a program built with MemberImportVisibility (Swift 7's default) sees a
// type's members only when their module is imported or re-exported — `Value.string`, a
// `Properties` literal, `ChangeOptions(transactionID:)` would not resolve through a typealias
// alone. What those modules make public is the values listed in scripts/check-structure.sh;
// their machinery is `package` and stays out of reach.
@_exported public import LMDB
@_exported public import Query
@_exported public import Queue
@_exported public import Remote
@_exported public import Storage
@_exported public import Sync

// The vocabulary of the public API: the types its methods take, return and throw, and nothing
// more. Each is defined in `Storage` or `Query`; a program that imports `OfflineStore` names them
// here and sees their public members, but not the rest of those modules. Sibling modules of this
// package (the CLI, the server, `Samples`) reach deeper with `package` access.

// MARK: Values

/// A property value: null, a primitive of every EDM type, an enum member, complex, collection.
public typealias Value = Storage.Value
/// An entity: property name → value.
public typealias Properties = Storage.Properties
/// `Edm.Decimal`: exact, a significand and the scale it was written with.
public typealias EDMDecimal = Storage.EDMDecimal
/// `Edm.Date`: days since 1970-01-01.
public typealias EDMDate = Storage.EDMDate
/// `Edm.DateTimeOffset`: an instant and the offset it was written with.
public typealias EDMDateTimeOffset = Storage.EDMDateTimeOffset
/// `Edm.TimeOfDay` (and V2's `Edm.Time`).
public typealias EDMTimeOfDay = Storage.EDMTimeOfDay
/// `Edm.Duration`, in ticks of 100 ns.
public typealias EDMDuration = Storage.EDMDuration
/// `Edm.Guid`.
public typealias EDMGuid = Storage.EDMGuid

// MARK: Opening a store

/// The service's schema, read from its `$metadata`: `store.schema`.
public typealias Schema = Storage.Schema
/// An operation the service offers (an action, a function, a V2 function import): `Schema.operations`.
public typealias ServiceOperation = Storage.ServiceOperation
/// What a `ConflictResolver` decides of a conflict.
public typealias ConflictResolution = Storage.ConflictResolution
/// `full` (a returned write survives power loss) or `noSync` (survives a process crash).
public typealias Durability = LMDB.Durability
/// Bounds on the work of one query request: `StoreConfiguration.limits`.
public typealias QueryLimits = Storage.QueryLimits

// MARK: Reading

/// A bound of `IndexCondition.range`: a value, inclusive or not.
public typealias ValueBound = Storage.ValueBound
/// The shape `query(_:format:…)` writes: `json` (OData V4), `jsonl` or `table`.
public typealias QueryFormat = Query.QueryFormat
/// What `query(_:…options:…)` and `delta` add for a server: service root, ETags, a delta link.
public typealias ResultOptions = Query.ResultOptions
/// What `query` read besides the body: a single entity's ETag.
public typealias ResultSummary = Query.ResultSummary
/// An OData URL parsed and bound once, run with new parameter alias values: `prepare(_:)`.
public typealias PreparedQuery = Query.PreparedQuery
/// One entity of a prepared query's result, its columns read in place (`PreparedQuery.forEachRow`).
public typealias ResultRow = Query.ResultRow

// MARK: Reports

/// What `check()` found.
public typealias IntegrityReport = Storage.IntegrityReport
/// How far `check()` has got.
public typealias CheckProgress = Storage.CheckProgress
/// What `stats()` counts: sets, their entities and indexes, file and map size.
public typealias StoreStats = Storage.StoreStats

// MARK: Errors

/// An entity or input the schema refuses (unknown set, property or index; wrong type; missing key).
public typealias EntityError = Storage.EntityError
/// A request URL that does not parse, bind or run, with the option and column.
public typealias QueryError = Query.QueryError
/// Input that is not JSON, with its line and column.
public typealias JSONError = Storage.JSONError
/// A `$metadata` document the store cannot use.
public typealias CSDLError = Storage.CSDLError
/// A store directory that cannot be used as asked: not a directory, read-only, a full disk.
public typealias EnvironmentError = LMDB.EnvironmentError

// MARK: For this package's other modules

/// Keeps files off descriptors 0–2: the CLI and the server call it before they open anything.
package typealias StandardDescriptors = LMDB.StandardDescriptors
public typealias LoadProgress = Sync.LoadProgress
public typealias LoadError = Sync.LoadError

// MARK: Credentials

/// Sets a request's credentials before it is sent: `flush(…, authorizer:)`, `refresh(…, authorizer:)`.
public typealias RequestAuthorizer = Remote.RequestAuthorizer
/// A request about to go to the service, as a `RequestAuthorizer` sees and changes it.
public typealias AuthorizedRequest = Remote.AuthorizedRequest
/// Why flush or refresh could not authenticate (never carrying a secret).
public typealias AuthenticationError = Remote.AuthenticationError
