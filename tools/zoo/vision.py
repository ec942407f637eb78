"""The vision zoo: timm's models against PaddleClas's ports of them (the optional extra requirements-vision.txt:
timm 1.0.31 and paddleclas 2.6.0, installed with --no-deps). Each pair is built from one architecture at a small
image (64 x 64, where the architecture takes it), its random weights made informative (informative: a tensor its
library sets to one constant, which hides a part from every check, drawn at random), converted with no map and no
layouts, and judged by compare_forward cumulative and isolated, then once with a bug planted on the Paddle side (its
first norm's epsilon), expected red at that norm.

    python -m tools.zoo.vision                     # every pair; writes docs/bench/zoo_vision.json and docs/zoo.md
    python -m tools.zoo.vision --only resnet50_vd  # some pairs; writes nothing (--write: their rows recorded)
    python -m tools.zoo.vision --fast              # forward cumulative and the plant (the suite's part)

Each pair runs in a process of its own (old PaddleClas backbones create parameters under fixed names: two cannot be
built in one process), at most --timeout seconds, at --threads threads (default one: the models are small, and a
kernel's threads waiting on each other's time slices while anything else runs cost more than they bring: ConvNeXt-T's
compare_forward with isolate took 11.7 s of CPU at two threads beside other jobs, 0.8 s at one).
"""
import argparse
import importlib
import importlib.util
import json
import sys
import time
import types
from pathlib import Path

try:
    import portcheck.core.runtime  # noqa: F401 (first: offline mode, threads, quiet notices, before torch and Paddle)
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from portcheck.core.errors import PipelineError, first_line, run_main
from tools import bench_doc
from tools.zoo import recorded

REQUIREMENTS = recorded.VISION_REQUIREMENTS
SIZE = 64  # the image's side, where the architecture takes any (LeViT's attention biases are sized for 224)
BATCH = 2
VIT_TINY = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, epsilon=1e-6)
# PaddleClas's foundation ViTs narrow and shallow: 2 blocks 64 wide of 2 heads (each its MLP's ratio)
FOUNDATION_TINY = dict(embed_dim=64, depth=2, num_heads=2)
# a Swin whose last stage is wider than its window (16, 8, 4 against 2): every stage's windows shift on both sides;
# Swin-T at 64 with windows of 2 (16, 8, 4, 2): its last stage is as wide as its window, as Swin-T's at 224 (7 x 7)
SWIN_SMALL = dict(img_size=SIZE, patch_size=4, embed_dim=48, depths=[2, 2, 2], num_heads=[3, 6, 12], window_size=2)
# Each pair: its architecture, timm's model (its name, its settings), PaddleClas's (a backbone's name in
# ppcls.arch.backbone, or module.Class under it; its settings), the image's side.
PAIRS = {
    "vit_tiny": dict(arch="ViT", timm=("vit_tiny_patch16_224", dict(img_size=SIZE)),
                     ppcls=("model_zoo.vision_transformer.VisionTransformer", dict(img_size=SIZE, **VIT_TINY))),
    "deit_tiny_distilled": dict(arch="DeiT", timm=("deit_tiny_distilled_patch16_224", dict(img_size=SIZE)),
                                ppcls=("DeiT_tiny_distilled_patch16_224", dict(img_size=SIZE))),
    "vit_small": dict(arch="ViT", timm=("vit_small_patch16_224", dict(img_size=SIZE)),
                      ppcls=("ViT_small_patch16_224", dict(img_size=SIZE))),
    "swin_tiny": dict(arch="Swin", timm=("swin_tiny_patch4_window7_224", dict(img_size=SIZE, window_size=2)),
                      ppcls=("legendary_models.swin_transformer.SwinTransformer",
                             dict(img_size=SIZE, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                                  window_size=2))),
    "swin_small_config": dict(arch="Swin", timm=("swin_tiny_patch4_window7_224", dict(SWIN_SMALL)),
                              ppcls=("legendary_models.swin_transformer.SwinTransformer", dict(SWIN_SMALL))),
    "clip_vit_base": dict(arch="ViT (CLIP)", timm=("vit_base_patch16_clip_224", dict(img_size=SIZE)),
                          ppcls=("model_zoo.foundation_vit.VisionTransformer",
                                 dict(model_name="CLIP_vit_base_patch16_224", img_size=SIZE, patch_size=16,
                                      embed_dim=768, depth=12, num_heads=12, qkv_bias=True, epsilon=1e-5))),
    # PaddleClas's foundation ViTs, one class switched by its model_name, built narrow and shallow on both sides
    "clip_vit_base32": dict(arch="ViT (CLIP)",
                            timm=("vit_base_patch32_clip_224", dict(img_size=SIZE, **FOUNDATION_TINY)),
                            ppcls=("model_zoo.foundation_vit.VisionTransformer",
                                   dict(model_name="CLIP_vit_base_patch32_224", img_size=SIZE, patch_size=32,
                                        qkv_bias=True, epsilon=1e-5, **FOUNDATION_TINY))),
    "beitv2_base": dict(arch="BEiT v2", timm=("beitv2_base_patch16_224", dict(img_size=SIZE, **FOUNDATION_TINY)),
                        ppcls=("model_zoo.foundation_vit.VisionTransformer",
                               dict(model_name="BEiTv2_vit_base_patch16_224", img_size=SIZE, patch_size=16,
                                    qkv_bias=True, epsilon=1e-6, **FOUNDATION_TINY))),
    "mae_vit_base": dict(arch="ViT (MAE)", timm=("vit_base_patch16_224.mae", dict(img_size=SIZE, **FOUNDATION_TINY)),
                         ppcls=("model_zoo.foundation_vit.VisionTransformer",
                                dict(model_name="MAE_vit_base_patch16", img_size=SIZE, patch_size=16, qkv_bias=True,
                                     **FOUNDATION_TINY))),
    # patches of 14: PaddleClas pads an image they do not divide (64 to 70), timm's patch embedding drops the rest.
    # timm's EVA-g that reads the class token, as PaddleClas's does (eva_giant_patch14_224 averages the patches)
    "eva_giant": dict(arch="EVA", timm=("eva_giant_patch14_clip_224", dict(img_size=56, **FOUNDATION_TINY)),
                      ppcls=("model_zoo.foundation_vit.VisionTransformer",
                             dict(model_name="EVA_vit_giant_patch14", img_size=56, patch_size=14, qkv_bias=True,
                                  mlp_ratio=4.3637, **FOUNDATION_TINY)), size=56),
    "convnext_tiny": dict(arch="ConvNeXt", timm=("convnext_tiny", {}), ppcls=("ConvNeXt_tiny", {})),
    "mobilenetv3_small": dict(arch="MobileNetV3", timm=("mobilenetv3_small_100", {}),
                              ppcls=("MobileNetV3_small_x1_0", {})),
    "efficientnet_b0": dict(arch="EfficientNet", timm=("tf_efficientnet_b0", {}), ppcls=("EfficientNetB0", {})),
    "resnet50_vd": dict(arch="ResNet-vd", timm=("resnet50d", {}), ppcls=("ResNet50_vd", {})),
    "resnet18_vd": dict(arch="ResNet-vd", timm=("resnet18d", {}), ppcls=("ResNet18_vd", {})),
    "repvgg_a0": dict(arch="RepVGG", timm=("repvgg_a0", {}), ppcls=("RepVGG_A0", {})),
    "pvt_v2_b0": dict(arch="PVTv2", timm=("pvt_v2_b0", {}), ppcls=("PVT_V2_B0", {})),
    "levit_128s": dict(arch="LeViT", timm=("levit_128s", {}), ppcls=("LeViT_128S", dict(distillation=True)), size=224),
    "hgnetv2_b0": dict(arch="PP-HGNetV2", timm=("hgnetv2_b0", {}), ppcls=("PPHGNetV2_B0", {})),
    "pplcnetv2_small": dict(arch="PP-LCNetV2", timm=("lcnetv2_small", {}), ppcls=("PPLCNetV2_small", {})),
    "ghostnet": dict(arch="GhostNet", timm=("ghostnet_100", {}), ppcls=("GhostNet_x1_0", {})),
    "pplcnet": dict(arch="PP-LCNet", timm=("lcnet_100", {}), ppcls=("PPLCNet_x1_0", {})),
    # the rest both list, each at its released config
    **{name: dict(arch=arch, timm=(t, dict(t_kw)), ppcls=(p, dict(p_kw)), **({"size": size} if size else {}))
       for name, arch, t, t_kw, p, p_kw, size in [
           ("resnet50", "ResNet", "resnet50", {}, "ResNet50", {}, 0),
           ("resnet34_vd", "ResNet-vd", "resnet34d", {}, "ResNet34_vd", {}, 0),
           ("resnext50_32x4d", "ResNeXt", "resnext50_32x4d", {}, "ResNeXt50_32x4d", {}, 0),
           ("se_resnext50_32x4d", "SE-ResNeXt", "seresnext50_32x4d", {}, "SE_ResNeXt50_32x4d", {}, 0),
           ("res2net50_26w_4s", "Res2Net", "res2net50_26w_4s", {}, "Res2Net50_26w_4s", {}, 0),
           ("resnest50", "ResNeSt", "resnest50d", {}, "ResNeSt50", {}, 0),
           ("densenet121", "DenseNet", "densenet121", {}, "DenseNet121", {}, 0),
           ("resnet50_vc", "ResNet-vc", "resnet50c", {}, "ResNet50_vc", {}, 0),
           ("resnext50_vd_32x4d", "ResNeXt-vd", "resnext50d_32x4d", {}, "ResNeXt50_vd_32x4d", {}, 0),
           ("resnext101_32x8d_wsl", "ResNeXt", "resnext101_32x8d", {}, "ResNeXt101_32x8d_wsl", {}, 0),
           ("se_resnet50_vd", "SE-ResNet-vd", "seresnet152d", dict(layers=[3, 4, 6, 3]), "SE_ResNet50_vd", {}, 0),
           ("se_resnext50_vd_32x4d", "SE-ResNeXt-vd", "seresnext101d_32x8d",
            dict(layers=[3, 4, 6, 3], base_width=4), "SE_ResNeXt50_vd_32x4d", {}, 0),
           ("res2net50_vd_26w_4s", "Res2Net-vd", "res2net50d", {}, "Res2Net50_vd_26w_4s", {}, 0),
           ("vgg11", "VGG", "vgg11", {}, "VGG11", {}, 224),  # PaddleClas flattens a 7 x 7 map
           ("inception_v3", "Inception", "inception_v3", {}, "InceptionV3", {}, 128),
           ("inception_v4", "Inception", "inception_v4", {}, "InceptionV4", {}, 128),
           ("xception41", "Xception", "xception41", {}, "Xception41", {}, 0),
           ("xception41_deeplab", "Xception (aligned)", "xception41", {}, "Xception41_deeplab", {}, 0),
           ("xception65_deeplab", "Xception (aligned)", "xception65", {}, "Xception65_deeplab", {}, 0),
           ("dpn68", "DPN", "dpn68", {}, "DPN68", {}, 0),
           ("dla34", "DLA", "dla34", {}, "DLA34", {}, 0),
           ("hrnet_w18", "HRNet", "hrnet_w18", {}, "HRNet_W18_C", {}, 0),
           ("cspdarknet53", "CSPNet", "cspdarknet53", {}, "CSPDarkNet53", {}, 0),
           ("darknet53", "DarkNet", "darknet53", {}, "DarkNet53", {}, 0),
           ("regnetx_200mf", "RegNet", "regnetx_002", {}, "RegNetX_200MF", {}, 0),
           ("mobilenetv1", "MobileNetV1", "mobilenetv1_100", {}, "MobileNetV1", {}, 0),
           ("mobilenetv2", "MobileNetV2", "mobilenetv2_100", {}, "MobileNetV2", {}, 0),
           ("mobilenetv4_conv_small", "MobileNetV4", "mobilenetv4_conv_small", {}, "MobileNetV4_conv_small", {}, 0),
           ("efficientnetv2_s", "EfficientNetV2", "tf_efficientnetv2_s", {}, "EfficientNetV2_S", {}, 0),
           ("tinynet_a", "TinyNet", "tinynet_a", {}, "TinyNet_A", {}, 0),
           ("mixnet_s", "MixNet", "mixnet_s", {}, "MixNet_S", {}, 224),  # PaddleClas pools a 7 x 7 map
           ("rexnet_100", "ReXNet", "rexnet_100", {}, "ReXNet_1_0", {}, 0),
           ("pphgnet_tiny", "PP-HGNet", "hgnet_tiny", {}, "PPHGNet_tiny", {}, 0),
           ("deit_tiny", "DeiT", "deit_tiny_patch16_224", dict(img_size=SIZE), "DeiT_tiny_patch16_224",
            dict(img_size=SIZE), 0),
           ("swinv2_tiny", "Swin V2", "swinv2_tiny_window8_256", {}, "SwinTransformerV2_tiny_patch4_window8_256", {},
            256),
           ("twins_pcpvt_small", "Twins", "twins_pcpvt_small", {}, "pcpvt_small", {}, 0),
           # PaddleClas's GroupAttention cuts the map into 7 x 7 windows without padding it: 224's maps, 56 to 7
           ("twins_svt_small", "Twins", "twins_svt_small", {}, "alt_gvt_small", {}, 224),
           ("tnt_small", "TNT", "tnt_s_patch16_224", dict(img_size=SIZE), "TNT_small", dict(img_size=SIZE), 0),
           ("mobilevit_s", "MobileViT", "mobilevit_s", {}, "MobileViT_S", {}, 0),
           ("mobilevitv2_050", "MobileViTV2", "mobilevitv2_050", {}, "MobileViTV2_x0_5", {}, 0),
           ("nextvit_small", "Next-ViT", "nextvit_small", {}, "NextViT_small_224", {}, 0),
           ("starnet_s1", "StarNet", "starnet_s1", {}, "StarNet_S1", {}, 0),
           ("fasternet_t0", "FasterNet", "fasternet_t0", {}, "FasterNet_T0", {}, 0),
       ]},
}
CLASSES = 10
# Why a pair is not the same model: PaddleClas's port differs from timm's there, found by copying each pair by hand
# (vision_page.findings says each with what the library said there). The module first, then what differs.
REASONS = {
    "vit_small": "PaddleClas's ViT_small_patch16_224 is another model than timm's vit_small_patch16_224: 768 wide "
                 "and 8 deep, where timm's is 384 wide and 12 deep",
    "swin_tiny": "layers.3, the last stage, no wider than its window (2 x 2 with windows of 2, as Swin-T's 7 x 7 at "
                 "224): PaddleClas shifts its windows there; timm does not",
    "mobilenetv3_small": "PaddleClas's MobileNetV3 has an extra 1x1 expand conv in block 0, SE widths C//4 not "
                         "rounded to 8, an SE gate of slope 0.2, and a 1280-wide head conv without bias",
    "pplcnet": "last_conv: PaddleClas's head conv has no bias; its Dropout is downscale_in_infer (x0.8 at "
               "evaluation)",
    "pplcnetv2_small": "dropout, the head's: PaddleClas's PPLCNetV2_small builds it with p=0.2 and "
                       "downscale_in_infer (x0.8 at evaluation); timm's lcnetv2_small has none (drop_rate 0)",
    "resnet18_vd": "stages.0.0 (blocks[0]): PaddleClas's ResNet18_vd adds a 1x1 conv + BN shortcut to the first "
                   "block (use_first_short_conv=True); timm's resnet18d has none",
    "resnet34_vd": "stages.0.0 (blocks[0]): PaddleClas's ResNet34_vd adds a 1x1 conv + BN shortcut to the first "
                   "block (use_first_short_conv=True); timm's resnet34d has none",
    "ghostnet": "PaddleClas's GhostNet gates its SE by clip(x, 0, 1) where timm's uses a hard sigmoid, and its SE "
                "widths are 18/30 where timm's are 20/32",
    "res2net50_26w_4s": "layer1.0 (stride 1): PaddleClas adds the previous split's output to each split's input "
                        "(convs.1 on) and passes the last split on; timm, as the paper's code, convolves each alone "
                        "and average-pools the last",
    "inception_v3": "every BatchNorm (Conv2d_1a_3x3.bn first): PaddleClas's epsilon is Paddle's default 1e-5, "
                    "timm's 1e-3; and the head's Dropout scales by 0.8 at evaluation (downscale_in_infer), timm's is "
                    "the identity there",
    "inception_v4": "features.4.branch1.1, the stem's 7-tap pair, and each InceptionB's: PaddleClas runs the (7, 1) "
                    "kernel first where timm (as TF-slim's) runs the (1, 7) one; and each Inception block "
                    "concatenates its pooled branch first, timm's last",
    "clip_vit_base": "proj: PaddleClas's CLIP ViT holds CLIP's image projection (768 x 512), which its classifier "
                     "never reads; and its forward drops the class token (remove_cls_token_in_forward): its head "
                     "reads the first patch token",
    "clip_vit_base32": "proj: PaddleClas's CLIP ViT holds CLIP's image projection (here 64 x 512), which its "
                       "classifier never reads; timm's holds none. Its class token reaches the head: PaddleClas's "
                       "table drops it for ViT-B/16 alone",
    "mae_vit_base": "patch_embed.proj: PaddleClas's foundation ViT's patch conv has no bias (conv_bias=False, as "
                    "CLIP's), timm's has one. Every LayerNorm's epsilon is the class's default 1e-5, timm's 1e-6. It "
                    "holds CLIP's image projection (proj), which its classifier never reads",
    "eva_giant": "patch_embed.proj: PaddleClas's foundation ViT's patch conv has no bias (conv_bias=False, as CLIP's), "
                 "timm's has one. Every LayerNorm's epsilon is the class's default 1e-5, timm's 1e-6. It holds CLIP's "
                 "image projection (proj), which its classifier never reads",
    "beitv2_base": "fc_norm, the head: PaddleClas's BEiT v2 classifies its class token, normed (norm); timm's (as "
                   "BEiT v2's fine-tuning code) the mean of its patch tokens, normed (fc_norm). Its patch conv "
                   "(patch_embed.proj) has no bias (conv_bias=False, as CLIP's), timm's has one. It holds CLIP's "
                   "image projection (proj), which its classifier never reads",
    "xception41_deeplab": "blocks.12.stack.conv1.conv_dw, the exit flow's last block: PaddleClas's "
                          "Xception41_deeplab dilates its separable convs by 2 (DeepLab's), timm's xception41 not; "
                          "its head's Dropout scales by 0.5 at evaluation (downscale_in_infer)",
    "xception65_deeplab": "blocks.20.stack.conv1.conv_dw, the exit flow's last block: PaddleClas's "
                          "Xception65_deeplab dilates its separable convs by 2 (DeepLab's), timm's xception65 not; "
                          "its head's Dropout scales by 0.5 at evaluation (downscale_in_infer)",
    "se_resnext50_vd_32x4d": "conv1, the deep stem: PaddleClas's SE_ResNeXt50_vd_32x4d's is 64, 64, 128 wide "
                             "(SENet-154's), timm's 'd' stem 32, 32, 64; its first block reads 128 channels "
                             "(layer1.0.conv1, layer1.0.downsample.1), timm's 64",
    "res2net50_vd_26w_4s": "layer1.0 (stride 1): PaddleClas adds the previous split's output to each split's input "
                           "(convs.1 on) and passes the last split on; timm, as the paper's code, convolves each "
                           "alone and average-pools the last",
    "xception41": "blocks.0.stack.conv1, every separable conv: PaddleClas's runs its pointwise conv before its "
                  "depthwise one, timm's (as the paper's) the depthwise first. PaddleClas's exit flow has two "
                  "separable convs to timm's three (its last depthwise 2048 wide against 1536)",
    "tinynet_a": "blocks.0: PaddleClas's TinyNet_A rounds each stage's depth up (2, 3, 3, 4, 4, 5, 2 blocks, "
                 "depth_trunc 'ceil'), timm's (as the authors') to the nearest (1, 2, 2, 4, 4, 5, 1)",
    "dpn68": "every BatchNorm (features.conv1_1.bn first): PaddleClas's epsilon is Paddle's default 1e-5, timm's "
             "1e-3",
    "darknet53": "every BatchNorm's activation (stem.conv1.bn first): PaddleClas's DarkNet53 applies ReLU, timm's "
                 "darknet53 LeakyReLU (slope 0.01)",
    "resnest50": "layer1.0.conv2.fc1, each split attention's first 1x1 conv: timm's has a bias before its "
                 "BatchNorm, PaddleClas's (conv2._conv) none",
    "hrnet_w18": "downsamp_modules.0.0 and final_layer.0, the classification head's convs: timm's have a bias before "
                 "their BatchNorm, PaddleClas's none",
    "vgg11": "features.0, every conv: PaddleClas's VGG convs have no bias; timm's (as torchvision's and the paper's) "
             "have one",
    "mobilenetv2": "blocks.0.0, the first block (expansion 1): PaddleClas's (conv2._first_block) keeps a 1x1 expand "
                   "conv + BN + ReLU6 (32 -> 32) that timm's, as torchvision's and the paper's, leaves out",
    "mobilevit_s": "stages.2.1.norm, each transformer's last LayerNorm: PaddleClas's epsilon is 1e-6, timm's 1e-5",
}



def _epsilons(kind: str, value: float, ending: str = ""):
    """An UNDONE edit: each norm of `kind` (its class name's start) whose name ends so given epsilon `value`."""
    def edit(pd):
        for name, layer in pd.named_sublayers():
            if type(layer).__name__.startswith(kind) and name.endswith(ending):
                layer._epsilon = value
    return edit


def _upscaled(pd):
    """An UNDONE edit: each Dropout that scales at evaluation (downscale_in_infer) scaling in training instead, as
    torch's does (the identity at evaluation)."""
    for layer in pd.sublayers():
        if type(layer).__name__ == "Dropout" and layer.mode == "downscale_in_infer":
            layer.mode = "upscale_in_train"


def _leaky(pd):
    """An UNDONE edit: each legacy BatchNorm applying ReLU applying LeakyReLU of slope 0.01 (timm's) instead."""
    import paddle.nn.functional as F
    for layer in pd.sublayers():
        if getattr(layer, "_act", None) == "relu":
            layer._act = None
            layer.forward = (lambda norm: lambda x: F.leaky_relu(norm(x), 0.01))(layer.forward)


def _unshifted(pd):
    """An UNDONE edit: the last stage's blocks' windows not shifted."""
    for block in pd.layers[-1].blocks:
        block.shift_size = 0


def _unprojected(pd):
    """An UNDONE edit: the projection the classifier never reads (proj) left out of the Paddle model."""
    pd._parameters.pop("proj")
    object.__setattr__(pd, "proj", None)  # its forward asks for it: None is its own "none"


def _class_token_kept(pd):
    """An UNDONE edit: the class token handed on to the pooling, which PaddleClas's table of differences drops for
    CLIP's ViT-B/16 (its forward reads the table, a global of its module, at each call)."""
    module = sys.modules[type(pd).__module__]
    module._model_diff = {**module._model_diff, "remove_cls_token_in_forward": []}


def _patch_biased(pd):
    """An UNDONE edit: the patch embedding's conv given a bias (zeros, which convert fills)."""
    conv = pd.patch_embed.proj
    conv.bias = conv.create_parameter([conv._out_channels], is_bias=True)


def _undilated(pd):
    """An UNDONE edit: the exit flow's last block's convs not dilated (padded by 1, as a 3 x 3 conv is)."""
    for layer in pd._exit_flow_2.sublayers():
        if type(layer).__name__ == "Conv2D" and layer._dilation != [1, 1]:
            layer._dilation, layer._updated_padding = [1, 1], [1, 1]


# Undone pairs portcheck still finds red, or refuses, though the two are one model (each copied by hand): its false
# verdicts, said on the page beside the undone run and held to the recorded rows by tests/test_zoo_vision.py
FALSE_VERDICTS = {}


# Pairs that are not the same model by a setting alone: (the setting timm's, the edit giving the Paddle model timm's).
# The zoo judges each again with the edit made, expected green and its plant red: the difference REASONS names is
# the only one.
UNDONE = {
    "inception_v3": ("every BatchNorm's epsilon 1e-3, the head's Dropout the identity at evaluation",
                     lambda pd: (_epsilons("BatchNorm", 1e-3)(pd), _upscaled(pd))),
    "dpn68": ("every BatchNorm's epsilon 1e-3", _epsilons("BatchNorm", 1e-3)),
    "pplcnetv2_small": ("the head's Dropout the identity at evaluation", _upscaled),
    "mobilevit_s": ("each transformer's last LayerNorm's epsilon 1e-5",
                    _epsilons("LayerNorm", 1e-5, "transformer.norm")),
    "darknet53": ("every BatchNorm's activation LeakyReLU (slope 0.01)", _leaky),
    "swin_tiny": ("the last stage's windows not shifted", _unshifted),
    "clip_vit_base": ("the projection its classifier never reads (proj) left out, the class token kept",
                      lambda pd: (_unprojected(pd), _class_token_kept(pd))),
    "clip_vit_base32": ("the projection its classifier never reads (proj) left out", _unprojected),
    "mae_vit_base": ("the patch conv biased, every LayerNorm's epsilon 1e-6, proj left out",
                     lambda pd: (_patch_biased(pd), _epsilons("LayerNorm", 1e-6)(pd), _unprojected(pd))),
    "eva_giant": ("the patch conv biased, every LayerNorm's epsilon 1e-6, proj left out",
                  lambda pd: (_patch_biased(pd), _epsilons("LayerNorm", 1e-6)(pd), _unprojected(pd))),
    **{name: ("the last block undilated, the Dropout the identity at evaluation",
              lambda pd: (_undilated(pd), _upscaled(pd))) for name in ("xception41_deeplab", "xception65_deeplab")},
}

def installed() -> str:
    """"" when timm and paddleclas are importable here, else what to install."""
    missing = [p for p in ("timm", "paddleclas") if importlib.util.find_spec(p) is None]
    return f"pip install --no-deps -r {REQUIREMENTS}" if missing else ""


def prepare():
    """timm (torchvision through the project's CPU loader first: timm imports it) and PaddleClas's backbones
    (ppcls, the package inside paddleclas's folder, imported without paddleclas's own __init__, which needs OpenCV;
    its logger set up, which the legendary models write to while built)."""
    from tools.zoo.torchvision_cpu import import_torchvision
    import_torchvision()
    import timm  # noqa: F401
    if "ppcls" not in sys.modules:  # paddleclas ships ppcls inside its folder, a namespace package of no __init__
        ppcls = types.ModuleType("ppcls")
        ppcls.__path__ = [str(Path(importlib.util.find_spec("paddleclas").origin).parent / "ppcls")]
        sys.modules["ppcls"] = ppcls
    from ppcls.utils import logger
    logger.init_logger()


def informative(model) -> None:
    """Draw at random each floating tensor its library sets to one constant (a norm's weight of ones, a bias or a
    running mean of zeros, a layer scale, a class token near zero): a constant hides what multiplies or adds it from
    every check. A running variance stays positive."""
    import torch
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            if t is None or not t.is_floating_point() or t.numel() < 2:
                continue
            if float(t.std()) > 1e-3 * max(1.0, float(t.abs().mean())):
                continue
            noise = torch.randn(t.shape, generator=g, dtype=t.dtype) * 0.1
            t.copy_((t + noise).abs() + 0.5 if name.endswith("running_var") else t + noise)


def build(name: str):
    """(timm model, PaddleClas model, images), seeded, both in eval mode, the timm model's weights informative."""
    import numpy as np
    import paddle
    import timm
    import torch
    pair = PAIRS[name]
    (t_name, t_kw), (p_name, p_kw) = pair["timm"], pair["ppcls"]
    torch.manual_seed(0)
    paddle.seed(0)
    pt = timm.create_model(t_name, pretrained=False, num_classes=CLASSES, **t_kw).eval()  # eval: no drop draws
    informative(pt)
    module, _, attr = p_name.rpartition(".")
    where = importlib.import_module(f"ppcls.arch.backbone.{module}" if module else "ppcls.arch.backbone")
    pd = getattr(where, attr)(class_num=CLASSES, **p_kw)
    pd.eval()
    size = pair.get("size", SIZE)
    return pt, pd, np.random.RandomState(0).randn(BATCH, 3, size, size).astype("float32")


def plant(pd):
    """(what, module, edit, undo): the Paddle model's first norm's epsilon set to another (a value read from another
    framework's defaults), or None where it has no norm."""
    for name, layer in pd.named_sublayers():
        eps = getattr(layer, "_epsilon", None)
        if isinstance(eps, float) and type(layer).__name__.startswith(("BatchNorm", "LayerNorm")):
            other = 1e-3 if eps < 1e-4 else 1e-5
            return (f"{name}'s epsilon {other:g}", name, lambda: setattr(layer, "_epsilon", other),
                    lambda: setattr(layer, "_epsilon", eps))
    return None


def red_at(report) -> str:
    """Where a forward report is first red, and by what."""
    if report.stopped:
        return "; ".join(f"the {side} model stopped: {e}" for side, e in report.stopped.items())[:300]
    red = [r for r in report.paired if not r.passed]
    if red:
        r = red[0]
        return f"{report.both(r.name)}: " + (r.problem or (f"{r.max:.3g} against {r.allowed:.3g}" if not r.max_ok
                                                         else r.why))[:300]
    return "isolated: " + ", ".join(d.both for d in report.differing)[:300]


def judge_one(name: str, fast: bool = False) -> dict:
    """The pair's row: its outcome and what the library said (a refusal's line, where forward was red, the plant)."""
    from portcheck import compare_forward, convert
    result = {"pair": name, "arch": PAIRS[name]["arch"], "classes": None}
    try:
        prepare()
        pt, pd, x = build(name)
    except Exception as e:  # noqa: BLE001 (a library's own failure is the pair's result)
        return {**result, "outcome": "not built", "said": first_line(e)[:300]}
    result["classes"] = f"{PAIRS[name]['ppcls'][0].rpartition('.')[2]} / {PAIRS[name]['timm'][0]}"
    again = lambda: _undone(name, pt, pd, x, fast)  # noqa: E731
    try:
        state = convert(pt, pd, inputs=x)
        result["said_convert"] = state.said[:300]
    except PipelineError as e:
        return _reasoned(name, {**result, "outcome": "refused", "said": f"portcheck: {e}"[:400]}, again)
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": f"convert: {first_line(e)}"[:300]}
    try:
        forward = compare_forward(pt, pd, x, isolate=not fast)
    except PipelineError as e:  # its pairing's refusal, after convert's
        return _reasoned(name, {**result, "outcome": "refused", "said": f"compare_forward: {e}"[:400]}, again)
    except Exception as e:  # noqa: BLE001
        return {**result, "outcome": "raises", "said": f"compare_forward: {first_line(e)}"[:300]}
    result["forward"] = forward.passed
    if not forward.passed:
        return _reasoned(name, {**result, "outcome": "red on the correct port", "said": red_at(forward)}, again)
    result["outcome"], result["plant"] = _planted(pt, pd, x, forward)
    if result["plant"] is None:
        del result["plant"]
    return result


def _planted(pt, pd, x, forward) -> tuple:
    """(outcome, the plant's row) of a pair forward found green: the plant made, judged with forward's pairs pinned,
    and undone."""
    from portcheck import compare_forward
    from portcheck.core.keys import ROOT
    planted = plant(pd)
    if planted is None:
        return "green, no part to plant in", None
    what, module, edit, undo = planted
    pinned = {t: p for t, p in forward.pairing.modules().items() if ROOT not in (t, p)}
    edit()
    try:
        report = compare_forward(pt, pd, x, pinned)
        red = [report.both(r.name) for r in report.paired if not r.passed]
        p = {"plant": what, "module": module, "red": not report.passed, "at": red[0] if red else "",
             "named": bool(red) and module in red[0]}
    finally:
        undo()
    return ("green, the plant red at its module" if p["named"] else "green, the plant red" if p["red"]
            else "green, the plant green"), p


def _undone(name: str, pt, pd, x, fast: bool) -> dict:
    """The pair judged again with its difference undone on the Paddle side (UNDONE): converted again, forward
    judged, the plant made; green with the plant red at its module says the difference named is the only one."""
    from portcheck import compare_forward, convert
    what, edit = UNDONE[name]
    edit(pd)
    try:
        convert(pt, pd, inputs=x)
        forward = compare_forward(pt, pd, x, isolate=not fast)
    except PipelineError as e:
        return {"what": what, "outcome": "refused", "said": f"portcheck: {e}"[:400]}
    if not forward.passed:
        return {"what": what, "outcome": "red on the correct port", "said": red_at(forward)}
    outcome, planted = _planted(pt, pd, x, forward)
    return {"what": what, "outcome": outcome, **({"plant": planted} if planted else {})}


def _reasoned(name: str, result: dict, again=None) -> dict:
    """A pair that is not the same model says so, with its difference, and what the library said (a refusal, or
    where it was red) stays beside it; one whose difference the zoo undoes (UNDONE) judged again so (again(): the
    row _undone gives; FALSE_VERDICTS: why it is still red or refused, though one model)."""
    if name in REASONS:
        result["refused_or_red"] = result["outcome"]
        result["outcome"], result["reason"] = "not the same model", REASONS[name]
    if name in UNDONE and again is not None:
        result["undone"] = again()
        if name in FALSE_VERDICTS:  # the one model still not green: the checks' own false verdict, said with it
            result["undone"]["false_verdict"] = FALSE_VERDICTS[name]
    return result


def row(r: dict) -> str:
    """A pair's line as the run prints it."""
    said = r.get("reason") or r.get("said") or ""
    plant = r.get("plant")
    if plant:
        said = f"plant {plant['plant']}: " + (f"red at {plant['at']}" if plant["red"] else "GREEN")
    u = r.get("undone")
    return f"{r['outcome']}" + (f"; {said}" if said else "") + (f"; undone ({u['what']}): {u['outcome']}" if u else "")


def write(results: list, seconds: float, run: dict):
    """docs/bench/zoo_vision.json (this run's rows over those held), then the zoo pages' vision section."""
    from tools.zoo import vision_page
    recorded.written_over(recorded.VISION_JSON, [{**r, "family": r["pair"]} for r in results], seconds, run,
                          list(PAIRS))
    vision_page.write_table()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--only", nargs="+", metavar="PAIR", help=f"some of: {' '.join(PAIRS)}; writes nothing")
    ap.add_argument("--fast", action="store_true", help="forward cumulative and the plant; writes nothing")
    ap.add_argument("--write", action="store_true", help="with --only: write its rows over those recorded")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one pair may take (default 600)")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each pair's process (default 1)")
    ap.add_argument("--one", metavar="PAIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(judge_one(args.one, args.fast)), flush=True)
        return
    if args.threads < 1:
        raise PipelineError(f"--threads {args.threads}: give 1 or more")
    unknown = sorted(set(args.only or ()) - set(PAIRS))
    if unknown:
        raise PipelineError(f"--only {' '.join(unknown)}: not a pair of this zoo; its pairs: {' '.join(PAIRS)}")
    if installed():
        raise PipelineError(f"timm or paddleclas is not installed (the vision zoo's optional extra): {installed()}")
    run = recorded.facts("tools.zoo.vision", sys.argv)
    start, results = time.time(), []
    for name in args.only or PAIRS:
        r = recorded.judged_alone("tools.zoo.vision", name, ["--fast"] * args.fast, args.timeout,
                                  {"OMP_NUM_THREADS": str(args.threads)}, pair=name, arch=PAIRS[name]["arch"])
        results.append(r)
        print(f"{name} ({r['seconds']} s, {r['cpu']} s of CPU): {row(r)}", flush=True)
        if (args.write or not args.only) and not args.fast:  # each row kept as it is judged: a stopped run keeps them
            write(results, time.time() - start, bench_doc.finish(run))
    print(f"{len(results)} pairs, {time.time() - start:.0f} s, {sum(r['cpu'] for r in results):.0f} s of CPU")
    if (args.write or not args.only) and not args.fast:
        print(f"wrote docs/bench/{recorded.VISION_JSON} and docs/zoo.md")


if __name__ == "__main__":
    run_main(main)
