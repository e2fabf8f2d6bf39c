print("locationctl")
