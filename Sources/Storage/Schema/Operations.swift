/// An operation a service offers besides its entity sets (issue 40): a V4 `Action` or
/// `Function` (bound to an entity type or unbound, reached through an `ActionImport` or
/// `FunctionImport`), or a V2 `FunctionImport` (with `m:HttpMethod`, and SAP's `sap:action-for`
/// naming the entity type it acts on).
public struct ServiceOperation: Sendable, Hashable {
    /// An action changes the service's data (V4 `Action`, a V2 import called with POST); a
    /// function only reads (V4 `Function`, a V2 import called with GET).
    public enum Kind: String, Sendable, Hashable {
        case action
        case function
    }

    /// The operation's name: qualified for V4 (`Lib.Renew`), the import's for V2
    /// (`ReleaseSalesOrder`).
    public var name: String
    public var kind: Kind
    /// The entity type (qualified) of the binding parameter, for a bound operation (V2: the type
    /// `sap:action-for` names); nil for an unbound one.
    public var bindingType: String?
    /// Whether it binds to a collection of `bindingType` rather than one entity.
    public var bindingIsCollection: Bool
    /// The parameters a caller gives, in order (the binding parameter left out).
    public var parameters: [Parameter]
    /// What it returns (nil: nothing).
    public var returnType: TypeName?
    /// The entity set its result belongs to (an import's `EntitySet`), when it returns entities.
    public var entitySet: String?
    /// The import that exposes an unbound operation at the service root (V4 `ActionImport` or
    /// `FunctionImport` name; V2 the import itself); nil for a bound operation.
    public var importName: String?
    /// The HTTP method that calls it: V4 POST for an action, GET for a function; V2 the import's
    /// `m:HttpMethod` (GET when it declares none).
    public var httpMethod: String

    public var isBound: Bool { bindingType != nil }

    /// A parameter: its name, type and facets.
    public struct Parameter: Sendable, Hashable {
        public var name: String
        public var type: TypeName
        public var nullable: Bool
        public var maxLength: Int?
        public var precision: Int?
        public var scale: Int?
    }

    /// A type as an operation names it: a primitive, complex, enum or entity type (qualified), or
    /// a collection of one.
    public struct TypeName: Sendable, Hashable, CustomStringConvertible {
        public var name: String
        public var isCollection: Bool
        /// The primitive type, when `name` is one.
        public var primitive: EDMPrimitive? { EDMPrimitive(typeName: name) }

        public var description: String { isCollection ? "Collection(\(name))" : name }
    }

    /// `Lib.Renew(Lib.Book)` — the name, with the binding type of a bound overload.
    public var signature: String {
        let parameterList = parameters.map { "\($0.name): \($0.type)" }.joined(separator: ", ")
        var text = "\(kind.rawValue) \(name)"
        if let bindingType { text += " bound to \(bindingIsCollection ? "Collection(\(bindingType))" : bindingType)" }
        text += "(\(parameterList))"
        if let returnType { text += " -> \(returnType)" }
        if let importName, importName != name { text += " as \(importName)" }
        return text
    }
}

extension Schema {
    /// The operations named `name` (a V4 qualified or unqualified name, an import's name, or a V2
    /// import): its overloads.
    public func operations(named name: String) -> [ServiceOperation] {
        operations.filter { op in
            op.name == name || op.importName == name || op.name.split(separator: ".").last.map(String.init) == name
        }
    }

    /// The overload of `name` bound to `type` (or unbound, for nil): V4 resolves overloads by
    /// their binding parameter.
    public func operation(named name: String, boundTo type: String?) -> ServiceOperation? {
        operations(named: name).first { $0.bindingType == type }
    }
}

extension CSDLReader {
    /// The operations of the document's schemas and containers.
    func readOperations(_ version: ODataVersion) throws(CSDLError) -> [ServiceOperation] {
        version == .v4 ? try readV4Operations() : try readV2FunctionImports()
    }

    /// V4: each `Action` and `Function` (every overload), with the import that exposes an unbound one.
    func readV4Operations() throws(CSDLError) -> [ServiceOperation] {
        var imports: [String: (name: String, set: String?)] = [:]
        for (_, container) in containers {
            for node in container.children where node.name == "ActionImport" || node.name == "FunctionImport" {
                let target = qualify(try Self.required(node, node.name == "ActionImport" ? "Action" : "Function"))
                imports[target] = (try Self.required(node, "Name"), node["EntitySet"])
            }
        }
        var out: [ServiceOperation] = []
        for (namespace, node) in operationDecls {
            let kind: ServiceOperation.Kind = node.name == "Action" ? .action : .function
            let name = namespace + "." + (try Self.required(node, "Name"))
            var parameters = try node.children("Parameter").map { p throws(CSDLError) in try parameter(p) }
            var bindingType: String? = nil
            var bindingIsCollection = false
            if Self.flag(node, "IsBound", default: false) {
                // A bound operation without its binding parameter cannot be called: left out.
                guard !parameters.isEmpty else { continue }
                let binding = parameters.removeFirst()
                bindingType = binding.type.name
                bindingIsCollection = binding.type.isCollection
            }
            let returnType = try node.child("ReturnType").map { r throws(CSDLError) in
                try typeName(try Self.required(r, "Type"), at: r)
            }
            let exposed = bindingType == nil ? imports[name] : nil
            out.append(
                ServiceOperation(
                    name: name, kind: kind, bindingType: bindingType, bindingIsCollection: bindingIsCollection,
                    parameters: parameters, returnType: returnType, entitySet: exposed?.set, importName: exposed?.name,
                    httpMethod: kind == .action ? "POST" : "GET"))
        }
        return out
    }

    /// V2: each container's `FunctionImport`; a POST import is an action, a GET one a function.
    func readV2FunctionImports() throws(CSDLError) -> [ServiceOperation] {
        var out: [ServiceOperation] = []
        for (_, container) in containers {
            for node in container.children("FunctionImport") {
                let name = try Self.required(node, "Name")
                let method = (node.attribute(local: "HttpMethod") ?? "GET").uppercased()
                let actionFor = node.attribute(local: "action-for").map { qualify($0) }
                out.append(
                    ServiceOperation(
                        name: name, kind: method == "GET" ? .function : .action, bindingType: actionFor,
                        bindingIsCollection: false,
                        parameters: try node.children("Parameter").map { p throws(CSDLError) in try parameter(p) },
                        returnType: try node["ReturnType"].map { t throws(CSDLError) in try typeName(t, at: node) },
                        entitySet: node["EntitySet"], importName: name, httpMethod: method))
            }
        }
        return out
    }

    func parameter(_ node: CSDLNode) throws(CSDLError) -> ServiceOperation.Parameter {
        ServiceOperation.Parameter(
            name: try Self.required(node, "Name"), type: try typeName(try Self.required(node, "Type"), at: node),
            nullable: Self.flag(node, "Nullable", default: true), maxLength: Self.integer(node["MaxLength"]),
            precision: Self.integer(node["Precision"]), scale: Self.integer(node["Scale"]))
    }

    /// A type an operation names, qualified. A name the document does not declare is kept as
    /// given: an operation's odd type must not stop the store from reading the service's data
    /// (calling that operation will say what is wrong).
    func typeName(_ text: String, at node: CSDLNode) throws(CSDLError) -> ServiceOperation.TypeName {
        let (inner, isCollection) = Self.unwrapCollection(text)
        return ServiceOperation.TypeName(name: qualify(inner), isCollection: isCollection)
    }
}
