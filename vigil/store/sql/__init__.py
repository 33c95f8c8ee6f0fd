"""The store's SQL, by concern."""
