//! Importers for the logs agents already write.
