//! Layers, losses and initializers.
