"""transformers ResNet-18 against paddle.vision resnet18: see README.md."""
