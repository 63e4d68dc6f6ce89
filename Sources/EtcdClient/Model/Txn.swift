// Transactions: compares, then the success or the failure operations, as one revision.

/// One condition of a transaction: a field of `key` (of every key in [key, rangeEnd) when given)
/// compared with a value.
public struct Compare: Sendable, Hashable {
    /// What is compared, with the value it is compared with.
    public enum Target: Sendable, Hashable {
        /// The key's version (0: the key does not exist).
        case version(Int64)
        /// The key's create revision (0: the key does not exist).
        case createRevision(Int64)
        /// The key's mod revision (0: the key does not exist).
        case modRevision(Int64)
        case value([UInt8])
        /// The key's lease (0: none).
        case lease(Int64)
    }

    /// How the key's field must compare with the target's value.
    public enum Result: String, Sendable, Hashable {
        case equal = "EQUAL"
        case notEqual = "NOT_EQUAL"
        case greater = "GREATER"
        case less = "LESS"
    }

    public var key: [UInt8]
    public var rangeEnd: [UInt8]?
    public var result: Result
    public var target: Target

    public init(key: [UInt8], _ result: Result, _ target: Target, rangeEnd: [UInt8]? = nil) {
        self.key = key
        self.result = result
        self.target = target
        self.rangeEnd = rangeEnd
    }
}

/// One operation of a transaction.
public enum RequestOp: Sendable, Hashable {
    case range(RangeRequest)
    case put(PutRequest)
    case deleteRange(DeleteRangeRequest)
}

/// The result of one operation of a transaction, in the order of the operations.
public enum ResponseOp: Sendable, Hashable {
    case range(RangeResponse)
    case put(PutResponse)
    case deleteRange(DeleteRangeResponse)
}

/// If every compare holds, the success operations, otherwise the failure operations; atomically.
public struct Txn: Sendable, Hashable {
    public var compares: [Compare]
    public var success: [RequestOp]
    public var failure: [RequestOp]

    public init(compares: [Compare] = [], success: [RequestOp] = [], failure: [RequestOp] = []) {
        self.compares = compares
        self.success = success
        self.failure = failure
    }
}

/// Which branch ran (a compare that failed is `succeeded == false`, not an error) and its results.
public struct TxnResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var succeeded: Bool
    public var responses: [ResponseOp]

    public init(header: ResponseHeader, succeeded: Bool, responses: [ResponseOp] = []) {
        self.header = header
        self.succeeded = succeeded
        self.responses = responses
    }
}
