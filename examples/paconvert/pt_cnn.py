"""A small CNN in the style of the early CIFAR ResNets: conv, BatchNorm, ReLU and max pooling in each stage, then
global average pooling and a Linear head, its weights initialized as those repositories did."""
import math

import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, in_planes, planes):
        super(ConvBlock, self).__init__()
        self.conv = nn.Conv2d(in_planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class SmallCNN(nn.Module):
    def __init__(self, num_classes=10, widths=(8, 16)):
        super(SmallCNN, self).__init__()
        layers, in_planes = [], 3
        for planes in widths:
            layers.append(ConvBlock(in_planes, planes))
            in_planes = planes
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_planes, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
        self.fc.weight.data.mul_(0.1)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)
