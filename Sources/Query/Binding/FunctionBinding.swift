import Storage

/// Built-in functions: arity, argument types and result type.
///
/// String: `contains startswith endswith` (→ Boolean), `indexof length` (→ Int32), `substring`
/// (1-2 integer arguments after the string), `tolower toupper trim concat` (→ String); V2
/// `substringof(needle, haystack)` binds as `contains(haystack, needle)`. Date/time: `year month
/// day hour minute second totaloffsetminutes` (→ Int32), `fractionalseconds` (→ Decimal), `date`,
/// `time`, `totalseconds`, `now maxdatetime mindatetime`. Math: `round floor ceiling` (→ argument
/// type). Types: `cast(x, Edm.T)` (→ T, null when not convertible), `isof(x, T)` (folded statically).
extension ExpressionBinder {
    private enum ArgumentKind: CustomStringConvertible {
        case string, integer, numeric, dateLike, timeLike, instant, duration

        func accepts(_ p: EDMPrimitive) -> Bool {
            switch self {
            case .string: p == .string
            case .integer: p.isInteger
            case .numeric: p.isNumeric
            case .dateLike: [.date, .dateTimeOffset, .dateTime].contains(p)
            case .timeLike: [.timeOfDay, .time, .dateTimeOffset, .dateTime].contains(p)
            case .instant: [.dateTimeOffset, .dateTime].contains(p)
            case .duration: p == .duration
            }
        }

        var description: String {
            switch self {
            case .string: "Edm.String"
            case .integer: "an integer"
            case .numeric: "numeric"
            case .dateLike: "Edm.Date or Edm.DateTimeOffset"
            case .timeLike: "Edm.TimeOfDay or Edm.DateTimeOffset"
            case .instant: "Edm.DateTimeOffset"
            case .duration: "Edm.Duration"
            }
        }

        /// The type a prepared alias passed as this argument gets; nil when the kind allows several.
        var aliasType: TypeRef? {
            switch self {
            case .string: .primitive(.string)
            case .integer: .primitive(.int32)
            case .instant: .primitive(.dateTimeOffset)
            case .duration: .primitive(.duration)
            case .numeric, .dateLike, .timeLike: nil
            }
        }
    }

    /// Signature: argument kinds (the trailing `optional` ones may be left out) and result type;
    /// a nil result means "same as the first argument".
    private static let signatures: [String: (args: [ArgumentKind], optional: Int, result: EDMPrimitive?)] = [
        "contains": ([.string, .string], 0, .boolean),
        "startswith": ([.string, .string], 0, .boolean),
        "endswith": ([.string, .string], 0, .boolean),
        "substringof": ([.string, .string], 0, .boolean),
        "indexof": ([.string, .string], 0, .int32),
        "length": ([.string], 0, .int32),
        "substring": ([.string, .integer, .integer], 1, .string),
        "tolower": ([.string], 0, .string),
        "toupper": ([.string], 0, .string),
        "trim": ([.string], 0, .string),
        "concat": ([.string, .string], 0, .string),
        "year": ([.dateLike], 0, .int32),
        "month": ([.dateLike], 0, .int32),
        "day": ([.dateLike], 0, .int32),
        "hour": ([.timeLike], 0, .int32),
        "minute": ([.timeLike], 0, .int32),
        "second": ([.timeLike], 0, .int32),
        "fractionalseconds": ([.timeLike], 0, .decimal),
        "totaloffsetminutes": ([.instant], 0, .int32),
        "date": ([.instant], 0, .date),
        "time": ([.instant], 0, .timeOfDay),
        "totalseconds": ([.duration], 0, .decimal),
        "now": ([], 0, .dateTimeOffset),
        "maxdatetime": ([], 0, .dateTimeOffset),
        "mindatetime": ([], 0, .dateTimeOffset),
        // SAP Offline OData's local-state functions (`sap.` spellings too), answered from the request queue.
        "offline.islocal": ([], 0, .boolean),
        "offline.haspendingchanges": ([], 0, .boolean),
        "offline.inerrorstate": ([], 0, .boolean),
        "round": ([.numeric], 0, nil),
        "floor": ([.numeric], 0, nil),
        "ceiling": ([.numeric], 0, nil),
    ]

    mutating func bindCall(_ name: String, _ syntax: [Expr], at: Int) throws(QueryError) -> TypedExpr {
        var lower = name.lowercased()
        if lower.hasPrefix("sap.") { lower = "offline." + lower.dropFirst(4) }
        if lower == "cast" || lower == "isof" { return try bindTypeFunction(lower, syntax, at: at) }
        guard let signature = Self.signatures[lower] else {
            if lower.hasPrefix("geo.") { throw error("function '\(name)' is not supported", at: at) }
            throw error("unknown function '\(name)'", at: at)
        }
        let count = signature.args.count
        guard syntax.count <= count, syntax.count >= count - signature.optional else {
            let expected = signature.optional == 0 ? "\(count)" : "\(count - signature.optional) or \(count)"
            throw error(
                "function '\(lower)' takes \(expected) argument\(count == 1 ? "" : "s"), not \(syntax.count)", at: at)
        }
        var args: [TypedExpr] = []
        for (i, arg) in syntax.enumerated() {
            let typed = try bindOperand(arg, expecting: signature.args[i].aliasType)
            if let type = typed.type {
                guard let p = type.primitive, signature.args[i].accepts(p) else {
                    throw error(
                        "argument \(i + 1) of '\(lower)' must be \(signature.args[i]), not \(type)", at: typed.position)
                }
            }
            args.append(typed)
        }
        if lower == "substringof" {
            return TypedExpr(.function("contains", [args[1], args[0]]), type: TypedExpr.boolean, at: at)
        }
        let result: TypeRef? = signature.result.map { .primitive($0) } ?? args.first?.type
        return TypedExpr(.function(lower, args), type: result, at: at)
    }

    /// `cast(x, Edm.T)` and `isof(x, Edm.T)`; the type argument is a (qualified) name.
    private mutating func bindTypeFunction(_ name: String, _ syntax: [Expr], at: Int) throws(QueryError) -> TypedExpr {
        guard syntax.count == 2 else {
            if syntax.count == 1 { throw error("\(name) of the current entity is not supported", at: at) }
            throw error("function '\(name)' takes 2 arguments, not \(syntax.count)", at: at)
        }
        guard case .path(let segments) = syntax[1].kind, segments.count == 1 else {
            throw error("expected a type name", at: syntax[1].position)
        }
        let typeName = segments[0].name
        let target: TypeRef
        if let p = EDMPrimitive(rawValue: typeName), p != .json {
            target = .primitive(p)
        } else if let e = TypeRules.enumType(named: typeName, in: schema), typeName.contains(".") {
            target = .enumeration(e.qualifiedName)
        } else {
            throw error("cannot \(name) to '\(typeName)'", at: syntax[1].position)
        }
        let operand = try bind(syntax[0])
        switch operand.type {
        case nil, .primitive?, .enumeration?: break
        case let type?: throw error("cannot \(name) a value of type \(type)", at: operand.position)
        }
        if name == "cast" {
            if operand.type == target { return operand }
            return TypedExpr(.function("cast", [operand]), type: target, at: at)
        }
        guard operand.type == target else { return TypedExpr(.literal(.bool(false)), type: TypedExpr.boolean, at: at) }
        let test = TypedExpr(.isNull(operand), type: TypedExpr.boolean, at: at)
        return TypedExpr(.not(test), type: TypedExpr.boolean, at: at)
    }
}
