/// The page's files, compiled into obsctl (`.embedInCode` in Package.swift): the page needs
/// nothing from the internet, and nothing on disk besides the obsctl binary.
enum Assets {
    struct File {
        let bytes: [UInt8]
        let contentType: String
    }

    static func file(at path: String) -> File? {
        switch path {
        case "/", "/index.html": File(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8")
        case "/app.css": File(bytes: PackageResources.app_css, contentType: "text/css; charset=utf-8")
        case "/app.js": File(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8")
        case "/graph.js": File(bytes: PackageResources.graph_js, contentType: "text/javascript; charset=utf-8")
        default: nil
        }
    }
}
