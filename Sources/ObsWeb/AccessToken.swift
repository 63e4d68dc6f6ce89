/// The secret in the URL `obsctl web` prints: 32 random bytes from the system's generator, as
/// hex. A request for data must carry it (`Authorization: Bearer`, see `WebRoutes`) or get 403:
/// the server listens on TCP, where any local user (or any page the browser runs, through DNS
/// rebinding) could otherwise reach it.
struct AccessToken: Sendable {
    let text: String

    init(text: String) { self.text = text }

    /// A fresh token (`SystemRandomNumberGenerator` reads getrandom(2)).
    static func random() -> AccessToken {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        let bytes = (0..<64).map { _ in digits[Int(generator.next() % 16)] }
        return AccessToken(text: String(decoding: bytes, as: UTF8.self))
    }

    /// Compares in time that does not depend on where `candidate` first differs.
    func matches(_ candidate: String?) -> Bool {
        guard let candidate else { return false }
        let expected = Array(text.utf8), given = Array(candidate.utf8)
        guard expected.count == given.count else { return false }
        var difference: UInt8 = 0
        for index in expected.indices { difference |= expected[index] ^ given[index] }
        return difference == 0
    }
}
