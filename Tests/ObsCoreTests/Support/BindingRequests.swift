import ObsCore
import TestSupport

/// Random binding requests over a few keys, for the tests that check where bindings are recorded:
/// `bind` one-way with a map or two-way, `unbind`, and `restore` of two bindings in one
/// transaction (which may share keys: the later displaces the earlier).
func randomBindingRequest(over names: [String], using random: inout SplitMix64) -> String {
    let from = names.randomElement(using: &random)!
    let to = names.filter { $0 != from }.randomElement(using: &random)!
    switch Int.random(in: 0..<7, using: &random) {
    case 0:
        return #"{"op":"unbind","to":"\#(to)"}"#
    case 1, 2:
        return #"{"op":"bind","from":"\#(from)","to":"\#(to)","map":"value"}"#
    case 6:
        let other = names.filter { $0 != to }.randomElement(using: &random)!
        return #"{"op":"restore","keys":[],"bindings":[{"from":"\#(from)","to":"\#(to)","two_way":true},"#
            + #"{"from":"\#(to)","to":"\#(other)","two_way":\#(Bool.random(using: &random))}]}"#
    default:
        return #"{"op":"bind","from":"\#(from)","to":"\#(to)","two_way":true}"#
    }
}

/// The bindings `dump` lists, each as its JSON, sorted.
func dumpedBindings(_ client: Client) -> [String] {
    (client.request(#"{"op":"dump"}"#)["bindings"]?.arrayValue ?? []).map(\.encoded).sorted()
}
