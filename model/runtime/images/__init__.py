"""Image side: a pretrained ImageNet CNN turns a photo into a feature vector z."""
