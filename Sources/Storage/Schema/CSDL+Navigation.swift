import LMDB
/// Navigation properties: V4 typed ones, V2/V3 association-based ones, partners and constraints.
extension CSDLReader {
    mutating func readAssociations() throws(CSDLError) {
        for qualified in associationDecls.keys.sorted() {
            guard let node = associationDecls[qualified] else { continue }
            var ends: [CSDLAssociation.End] = []
            for end in node.children("End") {
                ends.append(
                    .init(
                        role: try Self.required(end, "Role"), type: qualify(try Self.required(end, "Type")),
                        multiplicity: try Self.required(end, "Multiplicity")))
            }
            guard ends.count == 2, ends[0].role != ends[1].role else {
                throw CSDLError("an association needs two End elements with distinct roles", at: node)
            }
            var association = CSDLAssociation(ends: ends)
            if let constraint = node.child("ReferentialConstraint") {
                guard let principal = constraint.child("Principal"), let dependent = constraint.child("Dependent")
                else {
                    throw CSDLError("ReferentialConstraint needs Principal and Dependent", at: node)
                }
                let principalRole = try Self.required(principal, "Role")
                let dependentRole = try Self.required(dependent, "Role")
                guard association.end(principalRole) != nil, association.end(dependentRole) != nil,
                    principalRole != dependentRole
                else {
                    throw CSDLError("ReferentialConstraint roles do not match the association's ends", at: node)
                }
                let principalNames = try Self.propertyRefs(principal)
                let dependentNames = try Self.propertyRefs(dependent)
                guard principalNames.count == dependentNames.count, !principalNames.isEmpty else {
                    throw CSDLError(
                        "ReferentialConstraint has \(principalNames.count) principal and "
                            + "\(dependentNames.count) dependent properties", at: node)
                }
                association.principalRole = principalRole
                association.dependentRole = dependentRole
                association.pairs = zip(dependentNames, principalNames).map {
                    ReferentialConstraint(property: $0, referencedProperty: $1)
                }
            }
            associations[qualified] = association
        }
    }

    static func propertyRefs(_ node: CSDLNode) throws(CSDLError) -> [String] {
        var names: [String] = []
        for ref in node.children("PropertyRef") { names.append(try required(ref, "Name")) }
        return names
    }

    /// The navigation properties an entity type declares itself.
    mutating func declaredNavigation(of type: String, _ node: CSDLNode) throws(CSDLError) -> [NavigationProperty] {
        var result: [NavigationProperty] = []
        var names: Set<String> = []
        for child in node.children("NavigationProperty") {
            let navigation: NavigationProperty
            if child["Relationship"] != nil {
                let (nav, link) = try associationNavigation(child)
                navigation = nav
                links[type, default: [:]][nav.name] = link
            } else {
                navigation = try typedNavigation(child)
            }
            guard names.insert(navigation.name).inserted else {
                throw CSDLError("duplicate navigation property in \(node.label)", at: child)
            }
            result.append(navigation)
        }
        return result
    }

    /// A V4 navigation property: `Type`, `Nullable`, `Partner`, nested `ReferentialConstraint`s.
    func typedNavigation(_ node: CSDLNode) throws(CSDLError) -> NavigationProperty {
        let name = try Self.required(node, "Name")
        let (inner, isCollection) = Self.unwrapCollection(try Self.required(node, "Type"))
        let target = qualify(inner)
        guard entityDecls[target] != nil else { throw CSDLError("unknown entity type '\(inner)'", at: node) }
        var constraints: [ReferentialConstraint] = []
        for constraint in node.children("ReferentialConstraint") {
            constraints.append(
                ReferentialConstraint(
                    property: try Self.required(constraint, "Property"),
                    referencedProperty: try Self.required(constraint, "ReferencedProperty")))
        }
        return NavigationProperty(
            name: name, targetType: target, isCollection: isCollection,
            nullable: Self.flag(node, "Nullable", default: true), partner: node["Partner"],
            dependentConstraints: constraints)
    }

    /// A V2/V3 navigation property: `Relationship`, `FromRole`, `ToRole` resolved through its association.
    func associationNavigation(_ node: CSDLNode) throws(CSDLError) -> (NavigationProperty, CSDLLink) {
        let name = try Self.required(node, "Name")
        let relationship = qualify(try Self.required(node, "Relationship"))
        let link = CSDLLink(
            association: relationship, fromRole: try Self.required(node, "FromRole"),
            toRole: try Self.required(node, "ToRole"))
        guard let association = associations[relationship] else {
            throw CSDLError("unknown association '\(relationship)'", at: node)
        }
        guard association.end(link.fromRole) != nil, let target = association.end(link.toRole),
            link.fromRole != link.toRole
        else {
            throw CSDLError("FromRole/ToRole do not match association '\(relationship)'", at: node)
        }
        guard entityDecls[target.type] != nil else {
            throw CSDLError("unknown entity type '\(target.type)'", at: node)
        }
        var navigation = NavigationProperty(
            name: name, targetType: target.type,
            isCollection: target.multiplicity == "*",
            nullable: target.multiplicity != "1")
        if link.fromRole == association.dependentRole {
            navigation.dependentConstraints = association.pairs
        } else if link.fromRole == association.principalRole {
            navigation.principalConstraints = association.pairs
        }
        return (navigation, link)
    }

    /// Sets each V2/V3 navigation property's partner: the one using the same association with swapped roles.
    mutating func assignAssociationPartners() {
        var byRoles: [CSDLLink: [(type: String, name: String)]] = [:]
        for type in entityOrder {
            for nav in ownNavigation[type] ?? [] {
                if let link = links[type]?[nav.name] { byRoles[link, default: []].append((type, nav.name)) }
            }
        }
        for type in entityOrder {
            guard var navs = ownNavigation[type] else { continue }
            for index in navs.indices {
                guard let link = links[type]?[navs[index].name] else { continue }
                let swapped = CSDLLink(association: link.association, fromRole: link.toRole, toRole: link.fromRole)
                let candidates = byRoles[swapped] ?? []
                let target = navs[index].targetType
                navs[index].partner = (candidates.first { $0.type == target } ?? candidates.first)?.name
            }
            ownNavigation[type] = navs
        }
    }

    /// Gives a navigation property without constraints the mirrored dependent constraints of its partner.
    mutating func mirrorPrincipalConstraints() {
        for qualified in entityOrder {
            guard var type = entityTypes[qualified] else { continue }
            var lineage: Set<String> = []
            var current: String? = qualified
            while let name = current, lineage.insert(name).inserted { current = entityTypes[name]?.baseType }
            var changed = false
            for index in type.navigationProperties.indices {
                let nav = type.navigationProperties[index]
                guard nav.dependentConstraints.isEmpty, nav.principalConstraints.isEmpty,
                    let target = entityTypes[nav.targetType]
                else { continue }
                let partner = target.navigationProperties.first { candidate in
                    if let declared = nav.partner { return candidate.name == declared }
                    return candidate.partner == nav.name && lineage.contains(candidate.targetType)
                }
                guard let partner, !partner.dependentConstraints.isEmpty else { continue }
                type.navigationProperties[index].principalConstraints = partner.dependentConstraints
                changed = true
            }
            if changed { entityTypes[qualified] = type }
        }
    }
}
