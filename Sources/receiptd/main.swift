print("receiptd")
