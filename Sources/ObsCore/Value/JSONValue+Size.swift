extension JSONValue {
    /// Roughly the memory the value holds, in bytes: a string's UTF-8 bytes, a member's name, and
    /// 16 bytes for every value and member besides. What byte limits on kept values count (the
    /// history's); walked without recursion, however deep the value.
    var estimatedBytes: Int {
        switch self {
        case .null, .bool, .int, .double: return 16
        case .string(let text): return 16 + text.utf8.count
        case .array, .object: break
        }
        var total = 0
        var stack: [JSONValue] = [self]
        while let value = stack.popLast() {
            total += 16
            switch value {
            case .null, .bool, .int, .double: break
            case .string(let text): total += text.utf8.count
            case .array(let items): stack.append(contentsOf: items)
            case .object(let members):
                for (name, member) in members {
                    total += 16 + name.utf8.count
                    stack.append(member)
                }
            }
        }
        return total
    }
}
