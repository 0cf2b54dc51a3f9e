internal import CryptoFloor
import ReceiptEngine

/// Receipt bytes as files and logs hold them: DER, or base64 text of DER.
public enum ReceiptText {
    /// Decodes base64 text; anything else (DER, or text that is not base64) is returned as it is, for the engine
    /// to judge.
    public static func decodeDEROrBase64(_ bytes: [UInt8]) -> [UInt8] {
        guard !MalformedInput.isPEM(bytes), Base64.looksLikeText(bytes), let decoded = Base64.decodeText(bytes),
            !decoded.isEmpty
        else {
            return bytes
        }
        return decoded
    }
}
