public enum ReceiptServicePlaceholder {}
