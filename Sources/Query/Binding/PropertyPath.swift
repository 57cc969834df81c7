package import Storage

/// One step of a bound member path.
package enum PathStep: Sendable, Hashable, CustomStringConvertible {
    /// Follows a navigation property to the related entity (null when there is none) or, when
    /// collection-valued, to the related entities (only as the source of `any`/`all`/`$count`).
    case navigation(NavigationProperty, targetSet: String)
    /// Reads a structural property (primitive, enum, complex or collection) of the current value.
    case property(Property)

    package var name: String {
        switch self {
        case .navigation(let n, _): n.name
        case .property(let p): p.name
        }
    }

    package var description: String { name }
}

/// A member path resolved against the schema: from the entity being filtered (`$it`) or from a
/// lambda variable, through single-valued navigation and complex properties.
///
/// `Address/City` is `[.property(Address), .property(City)]`; `Customer/Name` is
/// `[.navigation(Customer, targetSet: "BusinessPartners"), .property(Name)]`. A lambda variable
/// over a primitive collection (`Tags/any(t: t eq 'x')`) is the path `t` with no steps.
package struct PropertyPath: Sendable, Hashable, CustomStringConvertible {
    /// nil for the current entity (`$it`); else the name of the lambda variable the path starts at.
    package var variable: String?
    package var steps: [PathStep]

    package init(variable: String? = nil, steps: [PathStep]) {
        self.variable = variable
        self.steps = steps
    }

    /// The step names joined by `/` (the variable first when there is one): `Address/City`, `d/Price`.
    package var description: String {
        ((variable.map { [$0] } ?? (steps.isEmpty ? ["$it"] : [])) + steps.map(\.name)).joined(separator: "/")
    }
}
