print("offline-store")
