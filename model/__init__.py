"""Everything learned: parsing, encoders, image features, the joint model, training."""
