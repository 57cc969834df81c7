import LMDB
/// An entity's (or complex value's) properties by name.
///
/// A small array of name–value pairs, not a hash table: entities have tens of properties, so a
/// lookup is a short scan of (mostly inline, small) strings, and decoding a row — which appends
/// in declaration order — hashes nothing. Equality ignores order: two `Properties` are equal when
/// they have the same names with equal values.
///
/// ```swift
/// var p: Properties = ["ProductID": .string("HT-1000"), "Price": .decimal(EDMDecimal("956.00")!)]
/// p["Name"] = .string("Notebook Basic 15")
/// for (name, value) in p { … }
/// ```
public struct Properties: Sendable, Hashable, ExpressibleByDictionaryLiteral, Sequence, CustomStringConvertible {
    public typealias Element = (key: String, value: Value)
    private var names: [String]
    private var items: [Value]

    public init() {
        names = []
        items = []
    }

    public init(minimumCapacity n: Int) {
        self.init()
        names.reserveCapacity(n)
        items.reserveCapacity(n)
    }

    /// Pairs from parallel arrays of the same length whose names are distinct (a decoder's).
    package init(uniqueNames names: [String], values: [Value]) {
        self.names = names
        items = values
    }

    /// Later duplicates replace earlier ones, as assignment would.
    public init(dictionaryLiteral elements: (String, Value)...) {
        self.init(minimumCapacity: elements.count)
        for (k, v) in elements { self[k] = v }
    }

    public init<S: Sequence>(_ pairs: S) where S.Element == (key: String, value: Value) {
        self.init()
        for (k, v) in pairs { self[k] = v }
    }

    @inline(__always)
    private func position(of key: String) -> Int? {
        for i in names.indices where names[i] == key { return i }
        return nil
    }

    /// The value named `key`, or nil. Setting nil removes it.
    public subscript(key: String) -> Value? {
        get { position(of: key).map { items[$0] } }
        set {
            if let i = position(of: key) {
                if let newValue { items[i] = newValue } else { names.remove(at: i); items.remove(at: i) }
            } else if let newValue {
                names.append(key)
                items.append(newValue)
            }
        }
    }

    public subscript(key: String, default fallback: @autoclosure () -> Value) -> Value {
        get { self[key] ?? fallback() }
        set { self[key] = newValue }
    }

    /// The value named `key`, looked for first at `cursor`, which then moves past it: a caller
    /// walking a type's properties in declaration order over properties in that order (decoded
    /// rows, payloads, generated entities) compares one name per property instead of scanning.
    /// One name in the way (a property the walk does not ask for) is stepped over; a name found
    /// elsewhere (a property set out of order, as an optional one added last) leaves the cursor
    /// where it was, so the properties after it are still found at the cursor.
    @inline(__always)
    public func value(_ key: String, cursor: inout Int) -> Value? {
        if cursor < names.count && names[cursor] == key {
            cursor += 1
            return items[cursor - 1]
        }
        if cursor + 1 < names.count && names[cursor + 1] == key {
            cursor += 2
            return items[cursor - 1]
        }
        guard let i = position(of: key) else { return nil }
        return items[i]
    }

    /// Appends a pair whose name is known not to be present (a decoder walking a type's properties).
    @inline(__always)
    public mutating func appendNew(_ key: String, _ value: Value) {
        names.append(key)
        items.append(value)
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> Value? {
        guard let i = position(of: key) else { return nil }
        names.remove(at: i)
        return items.remove(at: i)
    }

    public var keys: [String] { names }
    public var values: [Value] { items }
    public var count: Int { names.count }
    public var isEmpty: Bool { names.isEmpty }

    public struct Iterator: IteratorProtocol {
        let names: [String]
        let items: [Value]
        var i = 0
        public mutating func next() -> Element? {
            guard i < names.count else { return nil }
            defer { i += 1 }
            return (names[i], items[i])
        }
    }

    public func makeIterator() -> Iterator { Iterator(names: names, items: items) }

    public static func == (a: Properties, b: Properties) -> Bool {
        guard a.count == b.count else { return false }
        if a.names == b.names { return a.items == b.items }
        for (k, v) in a where b[k] != v { return false }
        return true
    }

    /// Order-independent: the sum of each pair's hash.
    public func hash(into hasher: inout Hasher) {
        var sum = 0
        for (k, v) in self {
            var h = Hasher()
            h.combine(k)
            h.combine(v)
            sum = sum &+ h.finalize()
        }
        hasher.combine(count)
        hasher.combine(sum)
    }

    public var description: String {
        isEmpty ? "[:]" : "[" + map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "]"
    }
}
