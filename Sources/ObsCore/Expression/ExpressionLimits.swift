/// The limits of the expression language, each a named constant with its default.
public enum ExpressionLimits {
    /// Deepest nesting the parser accepts: parentheses, brackets, braces, unary operators, and the
    /// height of the syntax tree (so a chain of 300 `+` is rejected too). Every pass over the tree
    /// recurses, and this bound is what keeps them all far from the end of a thread's stack.
    public static let maxDepth = 256
    /// Widest `pad_left` result, so one call cannot allocate without bound (values are at most
    /// 1 MiB anyway).
    public static let maxPadWidth = 1 << 20
    /// Largest precision in a `format` placeholder such as `{:.2f}`.
    public static let maxPrecision = 100
}
