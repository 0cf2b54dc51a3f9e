// swift-tools-version:6.0
import PackageDescription

// One place for the language settings of every target: Swift 6 mode with complete strict concurrency.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "receiptd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "receiptd", targets: ["receiptd"]),
        .library(name: "ReceiptEngine", targets: ["ReceiptEngine"]),
        .library(name: "HTTP1Server", targets: ["HTTP1Server"]),
        // For the separate Benchmarks/ package, which times validation together with the JSON answer.
        .library(name: "ReceiptService", targets: ["ReceiptService"]),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // Decode, verify and check App Store receipts; the only importer of COpenSSL. Knows nothing of HTTP.
        .target(name: "ReceiptEngine", dependencies: ["COpenSSL"], swiftSettings: strictSettings),
        // epoll and eventfd, which Swift's Glibc module leaves out; only HTTP1Server imports it.
        .systemLibrary(name: "CEpoll"),
        // A small HTTP/1.1 server on POSIX sockets, epoll and Dispatch. Knows nothing of receipts.
        .target(name: "HTTP1Server", dependencies: ["CEpoll"], swiftSettings: strictSettings),
        // Routes, configuration and JSON: joins the engine to the HTTP server.
        .target(name: "ReceiptService", dependencies: ["ReceiptEngine", "HTTP1Server"], swiftSettings: strictSettings),
        .executableTarget(name: "receiptd", dependencies: ["ReceiptService", "ReceiptEngine"], swiftSettings: strictSettings),
        // libFuzzer targets (see scripts/fuzz-smoke); a plain build links them as programs that do nothing.
        .executableTarget(name: "FuzzReceipt", dependencies: ["ReceiptEngine"], path: "Fuzz/FuzzReceipt", swiftSettings: strictSettings),
        .executableTarget(name: "FuzzHTTPRequest", dependencies: ["HTTP1Server"], path: "Fuzz/FuzzHTTPRequest", swiftSettings: strictSettings),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        // The purchase ledger on SQLite or PostgreSQL; the only importer of CSQLite and CPostgres. Knows nothing of
        // receipts, JWS or HTTP: the service maps verified data into its value types.
        .target(name: "Ledger", dependencies: ["CSQLite", "CPostgres"], swiftSettings: strictSettings),
        .testTarget(name: "ReceiptEngineTests", dependencies: ["ReceiptEngine"], swiftSettings: strictSettings),
        .testTarget(name: "HTTP1ServerTests", dependencies: ["HTTP1Server"], swiftSettings: strictSettings),
        .testTarget(name: "LedgerTests", dependencies: ["Ledger"], swiftSettings: strictSettings),
        .testTarget(
            name: "ReceiptServiceTests",
            dependencies: ["ReceiptService", "ReceiptEngine", "HTTP1Server"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
