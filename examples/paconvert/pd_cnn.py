import paddle

"""A small CNN in the style of the early CIFAR ResNets: conv, BatchNorm, ReLU and max pooling in each stage, then
global average pooling and a Linear head, its weights initialized as those repositories did."""
import math


class ConvBlock(paddle.nn.Module):
    def __init__(self, in_planes, planes):
        super(ConvBlock, self).__init__()
        self.conv = paddle.nn.Conv2d(
            in_planes, planes, kernel_size=3, stride=1, padding=1, bias=False
        )
        self.bn = paddle.nn.BatchNorm2D(num_features=planes)
        # hand fix: Paddle's ReLU takes no inplace=, and its class is MaxPool2D (PaConvert wrote MaxPool2d)
        self.relu = paddle.nn.ReLU()
        self.pool = paddle.nn.MaxPool2D(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class SmallCNN(paddle.nn.Module):
    def __init__(self, num_classes=10, widths=(8, 16)):
        super(SmallCNN, self).__init__()
        layers, in_planes = [], 3
        for planes in widths:
            layers.append(ConvBlock(in_planes, planes))
            in_planes = planes
        self.features = paddle.nn.Sequential(*layers)
        self.avgpool = paddle.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = paddle.compat.nn.Linear(in_planes, num_classes)
        for m in self.modules():
            if isinstance(m, paddle.nn.Conv2d):
                # hand fix: Paddle's Conv2D keeps its sizes as _kernel_size and _out_channels
                n = m._kernel_size[0] * m._kernel_size[1] * m._out_channels
                m.weight.data.normal_(0, math.sqrt(2.0 / n))
            elif isinstance(m, paddle.nn.BatchNorm2D):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
        # hand fix: Paddle's mul_ takes a tensor, not a float; scale_ takes the float
        self.fc.weight.data.scale_(0.1)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = paddle.flatten(x, 1)
        return self.fc(x)
