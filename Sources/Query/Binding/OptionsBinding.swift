import Storage

/// Binding of `$filter`, `$orderby`, `$select` and `$expand` (also nested in `$expand`).
extension Binder {
    /// Options nested in `$expand` report errors as `$expand` (their columns are within its text).
    func bindOptions(
        _ options: QueryOptions, type: EntityType, set: String, nestedIn: String?
    ) throws(QueryError) -> BoundOptions {
        var out = BoundOptions()
        if let filter = options.filter {
            var binder = expressionBinder(option: nestedIn ?? "$filter", entityType: type, entitySet: set)
            out.filter = try binder.bindPredicate(filter)
        }
        for item in options.orderBy {
            let option = nestedIn ?? "$orderby"
            var binder = expressionBinder(option: option, entityType: type, entitySet: set)
            let e = try binder.bind(item.expression)
            switch e.type {
            case .primitive(let p)? where p != .json: break
            case .enumeration?: break
            default:
                throw QueryError(
                    "cannot order by a value of type \(e.type?.description ?? "null")", option: option,
                    column: e.position)
            }
            out.orderBy.append(BoundOrderBy(expression: e, descending: item.descending))
        }
        out.expand = try bindExpand(options.expand, type: type, set: set, option: nestedIn ?? "$expand")
        if let select = options.select {
            try applySelect(select.map { $0.path[...] }, to: &out, type: type, option: nestedIn ?? "$select")
        }
        out.top = options.top
        out.skip = options.skip
        out.count = options.count ?? false
        out.search = options.search
        return out
    }

    // MARK: $expand

    private func bindExpand(
        _ items: [ExpandItem], type: EntityType, set: String, option: String
    ) throws(QueryError) -> [BoundExpand] {
        var result: [BoundExpand] = []
        for item in items {
            if item.path.count == 1, item.path[0].name == "*" {
                for nav in type.navigationProperties {
                    try merge(
                        try expandChain(
                            [PathSegment(nav.name, at: item.path[0].position)][...], options: item.options,
                            type: type, set: set, option: option), into: &result, option: option)
                }
                continue
            }
            try merge(
                try expandChain(item.path[...], options: item.options, type: type, set: set, option: option),
                into: &result, option: option)
        }
        return result
    }

    /// `A/B/C` (V2) as A expanding B expanding C; the options belong to the last segment.
    private func expandChain(
        _ path: ArraySlice<PathSegment>, options: QueryOptions, type: EntityType, set: String,
        option: String
    ) throws(QueryError) -> BoundExpand {
        guard let segment = path.first else {
            throw QueryError("expected a navigation property", option: option, column: nil)
        }
        guard let nav = type.navigationProperty(segment.name) else {
            let message: QueryError.Message =
                type.property(segment.name) != nil
                ? "'\(segment.name)' is not a navigation property"
                : segment.name == "*"
                    ? "'*' must stand alone in $expand" : "unknown navigation property '\(segment.name)'"
            throw QueryError(message, option: option, column: segment.position)
        }
        guard let target = schema.entityTypes[nav.targetType], let targetSet = schema.targetSet(of: nav, from: set)
        else {
            throw QueryError(
                "no entity set for navigation property '\(nav.name)'", option: option, column: segment.position)
        }
        var expand = BoundExpand(
            navigation: nav, entitySet: targetSet, entityType: target.qualifiedName,
            options: BoundOptions(), position: segment.position)
        if path.count == 1 {
            expand.options = try bindOptions(options, type: target, set: targetSet, nestedIn: option)
        } else {
            expand.options.expand = [
                try expandChain(path.dropFirst(), options: options, type: target, set: targetSet, option: option)
            ]
        }
        return expand
    }

    /// Adds `e` to `list`, merging with an expansion of the same navigation property (`A/B,A/C`).
    private func merge(_ e: BoundExpand, into list: inout [BoundExpand], option: String) throws(QueryError) {
        guard let i = list.firstIndex(where: { $0.navigation.name == e.navigation.name }) else {
            list.append(e)
            return
        }
        var existing = list[i]
        var children = e.options.expand
        if e.options.hasOwnOptions {
            guard !existing.options.hasOwnOptions else {
                throw QueryError(
                    "'\(e.navigation.name)' is expanded more than once", option: option, column: e.position)
            }
            children = existing.options.expand
            existing.options = e.options
        }
        for child in children { try merge(child, into: &existing.options.expand, option: option) }
        list[i] = existing
    }

    // MARK: $select

    /// Applies select paths; V2 `Nav/Prop` paths go to the expansion of `Nav` (which must exist).
    private func applySelect(
        _ paths: [ArraySlice<PathSegment>], to options: inout BoundOptions, type: EntityType,
        option: String
    ) throws(QueryError) {
        var select = options.select ?? BoundSelect()
        var star = false
        var nested: [(index: Int, paths: [ArraySlice<PathSegment>])] = []
        for path in paths {
            guard let first = path.first else {
                throw QueryError("expected a property name", option: option, column: nil)
            }
            if first.name == "*" {
                guard path.count == 1 else {
                    throw QueryError("unexpected '/' after '*'", option: option, column: first.position)
                }
                star = true
            } else if let p = type.property(first.name) {
                // Once each: the writer walks the selection for every entity, so a repeated item
                // would cost per row without changing the answer.
                let selected = try selectedProperty(p, path.dropFirst(), option: option)
                if !select.properties.contains(selected) { select.properties.append(selected) }
            } else if let nav = type.navigationProperty(first.name) {
                if !select.navigations.contains(nav.name) { select.navigations.append(nav.name) }
                guard path.count > 1 else { continue }
                guard let index = options.expand.firstIndex(where: { $0.navigation.name == nav.name }) else {
                    throw QueryError(
                        "'\(nav.name)' must be expanded to select its properties", option: option,
                        column: first.position)
                }
                if let k = nested.firstIndex(where: { $0.index == index }) {
                    nested[k].paths.append(path.dropFirst())
                } else {
                    nested.append((index, [path.dropFirst()]))
                }
            } else {
                throw QueryError(
                    first.name.contains(".")
                        ? "type cast '\(first.name)' is not supported" : "unknown property '\(first.name)'",
                    option: option, column: first.position)
            }
        }
        for (index, group) in nested {
            let target = schema.entityTypes[options.expand[index].entityType]!
            try applySelect(group, to: &options.expand[index].options, type: target, option: option)
        }
        options.select = star ? nil : select
    }

    /// `Address/City`: a path of structural properties through complex types.
    private func selectedProperty(
        _ first: Property, _ rest: ArraySlice<PathSegment>, option: String
    ) throws(QueryError) -> PropertyPath {
        var steps: [PathStep] = [.property(first)]
        var type = first.type
        for segment in rest {
            guard case .complex(let name) = type, let complex = schema.complexTypes[name],
                let p = complex.property(segment.name)
            else {
                throw QueryError("unknown property '\(segment.name)'", option: option, column: segment.position)
            }
            steps.append(.property(p))
            type = p.type
        }
        return PropertyPath(steps: steps)
    }
}
