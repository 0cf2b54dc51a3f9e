public enum ReceiptdVersion { public static let current = "0.3.0" }
