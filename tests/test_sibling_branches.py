"""Sibling branches whose norms hold equal shapes (RepVGG's 3x3 and 1x1 branches, each conv followed by a BatchNorm of
the same width), run in another order on the two sides: no shape or order says which norm is which, the converted
run does (convert settles the tie as it settles an order's pairs: mapping.pairing, mapping.settle). Green with no map;
a plant in one branch's norm red at that norm. So too for norms holding their activation as children (timm's
BatchNormAct2d) in a stage whose first block widens (a list paired child by child), and for branch norms a conversion
by hand swapped: red at the first, the pairing around them held by their branches. And for an Inception-like block whose
pooled branch the port runs first: its (1, 3) conv paired with the (1, 3) conv over a 1x1 conv of as many values,
its three 1x1 convs settled as one group by the run; a pool planted downstream red at the conv it feeds."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
paddle = pytest.importorskip("paddle")
from portcheck import compare_forward, convert  # noqa: E402

X = np.random.RandomState(0).randn(2, 4, 8, 8).astype("float32")


def pair(plant=None):
    """Two RepVGG blocks (a 3x3 conv + BN branch, a 1x1 conv + BN branch, an identity BN, their sum, ReLU), as timm
    and PaddleClas write them: torch runs the identity first, then the 1x1 branch; the port the 3x3 one first. Every BN's statistics and affine drawn at random. plant "eps": the port's second
    block's 1x1 BN epsilon 1e-3."""
    def branch_pt(k):
        return torch.nn.Sequential(torch.nn.Conv2d(4, 4, k, padding=k // 2, bias=False), torch.nn.BatchNorm2d(4))

    def branch_pd(k, eps=1e-5):
        return paddle.nn.Sequential(paddle.nn.Conv2D(4, 4, k, padding=k // 2, bias_attr=False),
                                    paddle.nn.BatchNorm2D(4, epsilon=eps))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.identity, self.conv_kxk, self.conv_1x1 = torch.nn.BatchNorm2d(4), branch_pt(3), branch_pt(1)

        def forward(self, x):
            identity = self.identity(x)
            return torch.relu(self.conv_1x1(x) + self.conv_kxk(x) + identity)

    class PdBlock(paddle.nn.Layer):
        def __init__(self, eps=1e-5):
            super().__init__()
            self.rbr_identity, self.rbr_dense, self.rbr_1x1 = paddle.nn.BatchNorm2D(4), branch_pd(3), branch_pd(1, eps)

        def forward(self, x):
            return paddle.nn.functional.relu(self.rbr_dense(x) + self.rbr_1x1(x) + self.rbr_identity(x))

    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(Block(), Block())
    pd = paddle.nn.Sequential(PdBlock(), PdBlock(1e-3 if plant == "eps" else 1e-5))
    with torch.no_grad():
        for m in pt.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.normal_(1, 0.3), m.bias.normal_(0, 0.3), m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.01, 2)  # small variances: an epsilon's change shows
    return pt.eval(), pd


def test_sibling_branches_of_equal_shapes_are_told_apart_by_the_run_and_green():
    pt, pd = pair()
    convert(pt, pd, inputs=X)
    pd.eval()
    assert np.array_equal(pd[1].rbr_1x1[1]._variance.numpy(), pt[1].conv_1x1[1].running_var.numpy())
    assert compare_forward(pt, pd, X, isolate=True).passed


def test_a_plant_in_one_branchs_norm_is_red_at_that_norm():
    pt, pd = pair(plant="eps")
    convert(pt, pd, inputs=X)
    pd.eval()
    report = compare_forward(pt, pd, X)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and "1.conv_1x1.1" in red[0], red


# ---------------------------------------------------------------- norms holding their activation, a stage of blocks

class NormAct(torch.nn.BatchNorm2d):
    """timm's BatchNormAct2d: a BatchNorm holding its dropout and activation as children."""
    def __init__(self, n, act=False):
        super().__init__(n)
        self.drop, self.act = torch.nn.Identity(), torch.nn.ReLU() if act else torch.nn.Identity()

    def forward(self, x):
        return self.act(self.drop(super().forward(x)))


class ConvNorm(torch.nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False), NormAct(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class RepVggBlock(torch.nn.Module):
    """timm's order: the identity norm first (where the block keeps its width), then the 1x1 branch, the 3x3 one."""
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.identity = NormAct(cout) if cin == cout and stride == 1 else None
        self.conv_kxk, self.conv_1x1 = ConvNorm(cin, cout, 3, stride), ConvNorm(cin, cout, 1, stride)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        identity = self.identity(x) if self.identity is not None else 0
        return self.act(self.conv_1x1(x) + self.conv_kxk(x) + identity)


class PdConvNorm(paddle.nn.Layer):
    def __init__(self, cin, cout, k, stride, eps=1e-5, dilation=1):
        super().__init__()
        self.conv = paddle.nn.Conv2D(cin, cout, k, stride, padding=k // 2 * dilation, dilation=dilation,
                                     bias_attr=False)
        self.bn = paddle.nn.BatchNorm2D(cout, epsilon=eps)

    def forward(self, x):
        return self.bn(self.conv(x))


class RepVGGBlock(paddle.nn.Layer):
    """PaddleClas's order: the 3x3 branch, the 1x1 one, the identity norm last."""
    def __init__(self, cin, cout, stride, eps=1e-5, dilation=1):
        super().__init__()
        self.rbr_identity = paddle.nn.BatchNorm2D(cout) if cin == cout and stride == 1 else None
        self.rbr_dense = PdConvNorm(cin, cout, 3, stride, dilation=dilation)
        self.rbr_1x1 = PdConvNorm(cin, cout, 1, stride, eps)

    def forward(self, x):
        identity = self.rbr_identity(x) if self.rbr_identity is not None else 0
        return paddle.nn.functional.relu(self.rbr_dense(x) + self.rbr_1x1(x) + identity)


def stage_pair(plant=None):
    """A stage of three RepVGG blocks (the first widening, with no identity norm: the blocks differ) on each side,
    timm's norms holding their activation as children. plant "eps": the port's last block's 1x1 norm epsilon 1e-3;
    "dilation": its middle block's 3x3 conv dilated by 2 (padded to the same size)."""
    torch.manual_seed(0)
    paddle.seed(0)
    widths = [(4, 8, 2), (8, 8, 1), (8, 8, 1)]
    pt = torch.nn.Sequential(*[RepVggBlock(*w) for w in widths])
    pd = paddle.nn.Sequential(*[RepVGGBlock(*w, eps=1e-3 if plant == "eps" and n == 2 else 1e-5,
                                            dilation=2 if plant == "dilation" and n == 1 else 1)
                                for n, w in enumerate(widths)])
    with torch.no_grad():
        for m in pt.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.normal_(1, 0.3), m.bias.normal_(0, 0.3), m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.01, 2)
    return pt.eval(), pd


def test_norms_holding_their_activation_in_a_stage_of_unlike_blocks_are_told_apart_by_the_run_and_green():
    pt, pd = stage_pair()
    convert(pt, pd, inputs=X)
    pd.eval()
    for n in (1, 2):  # each branch's norm in its own block's branch, the identity norm in the identity's
        assert np.array_equal(pd[n].rbr_dense.bn.weight.numpy(), pt[n].conv_kxk.bn.weight.detach().numpy())
        assert np.array_equal(pd[n].rbr_identity._variance.numpy(), pt[n].identity.running_var.numpy())
    assert compare_forward(pt, pd, X, isolate=True).passed


def test_a_plant_in_a_norm_holding_its_activation_is_red_at_that_norm():
    pt, pd = stage_pair(plant="eps")
    convert(pt, pd, inputs=X)
    pd.eval()
    report = compare_forward(pt, pd, X)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and "2.conv_1x1.bn" in red[0], red


def test_branch_norms_swapped_on_the_paddle_side_are_red_at_the_first():
    """A conversion by hand sending each branch's norm to the other's (the 3x3 branch's to the 1x1's): red at the
    first block it reaches, never paired around."""
    pt, pd = stage_pair()
    convert(pt, pd, inputs=X)
    pd.eval()
    dense, one = pd[1].rbr_dense.bn, pd[1].rbr_1x1.bn
    for a, b in ((dense.weight, one.weight), (dense.bias, one.bias), (dense._mean, one._mean),
                 (dense._variance, one._variance)):
        x, y = a.numpy().copy(), b.numpy().copy()
        a.set_value(y), b.set_value(x)
    report = compare_forward(pt, pd, X)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert not report.passed and red and red[0].startswith("1."), red


def test_a_branch_no_order_of_its_norms_makes_torchs_is_said_by_convert_and_red_at_its_conv():
    """The middle block's 3x3 conv dilated: no order of the block's norms gives torch's values on the converted run.
    convert keeps the run's order and says each order's distance; the comparison is red at the conv."""
    pt, pd = stage_pair(plant="dilation")
    state = convert(pt, pd, inputs=X)
    pd.eval()
    assert "no order gives torch's values" in state.said and "1.conv_kxk.bn" in state.said, state.said
    report = compare_forward(pt, pd, X)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and red[0].startswith("1.conv_kxk.conv"), red


# ---------------------------------------------------------------- a (1, 3) conv and a 1x1 conv of as many values

class InceptionBlock(torch.nn.Module):
    """timm's Inception order: a 1x1 branch, a 1x1 then (1, 3) branch, a pooled 1x1 branch, concatenated so."""
    def __init__(self):
        super().__init__()
        conv = lambda i, o, k, p: torch.nn.Conv2d(i, o, k, padding=p, bias=False)  # noqa: E731
        self.branch0 = conv(6, 2, 1, 0)
        self.branch1 = torch.nn.Sequential(conv(6, 2, 1, 0), conv(2, 2, (1, 3), (0, 1)))
        self.branch2 = torch.nn.Sequential(torch.nn.AvgPool2d(3, 1, 1), conv(6, 2, 1, 0))

    def forward(self, x):
        return torch.cat([self.branch0(x), self.branch1(x), self.branch2(x)], 1)


class PdInceptionBlock(paddle.nn.Layer):
    """The same model, its pooled branch run first and concatenated where torch's is. plant "pool": its pool leaves
    the padding out of each mean (Paddle's default; torch's AvgPool2d counts it); "dilation": its (1, 3) conv dilated
    by 2 (padded to the same size)."""
    def __init__(self, plant=None):
        super().__init__()
        conv = lambda i, o, k, p, d=1: paddle.nn.Conv2D(i, o, k, padding=p, dilation=d, bias_attr=False)  # noqa: E731
        self.pool = paddle.nn.AvgPool2D(3, 1, 1, exclusive=plant == "pool")
        self._conv1, self._conv2, self._conv3_1 = conv(6, 2, 1, 0), conv(6, 2, 1, 0), conv(6, 2, 1, 0)
        self._conv3_2 = conv(2, 2, (1, 3), (0, 2), (1, 2)) if plant == "dilation" else conv(2, 2, (1, 3), (0, 1))

    def forward(self, x):
        pooled = self._conv1(self.pool(x))
        return paddle.concat([self._conv2(x), self._conv3_2(self._conv3_1(x)), pooled], 1)


def inception_pair(plant=None):
    """Two Inception-like blocks on each side, a plant (PdInceptionBlock's) in the port's second."""
    torch.manual_seed(0)
    paddle.seed(0)
    return torch.nn.Sequential(InceptionBlock(), InceptionBlock()).eval(), paddle.nn.Sequential(
        PdInceptionBlock(), PdInceptionBlock(plant))


X_INCEPTION = np.random.RandomState(0).randn(2, 6, 8, 8).astype("float32")


def test_a_branch_run_first_elsewhere_with_a_1x3_conv_beside_1x1_convs_is_green():
    """The (1, 3) conv pairs with the (1, 3) conv, not with a 1x1 conv of as many values; the three 1x1 convs, the
    run's order pairing them across branches, are settled together by the converted run."""
    pt, pd = inception_pair()
    state = convert(pt, pd, inputs=X_INCEPTION)
    pd.eval()
    for n in (0, 1):
        assert np.array_equal(pd[n]._conv1.weight.numpy(), pt[n].branch2[1].weight.detach().numpy())
        assert np.array_equal(pd[n]._conv3_2.weight.numpy(), pt[n].branch1[1].weight.detach().numpy())
    assert not state.said, state.said
    assert compare_forward(pt, pd, X_INCEPTION).passed


def test_a_pool_counting_its_padding_otherwise_is_red_at_the_conv_it_feeds_the_1x1_convs_settled_around_it():
    """The port's second pool leaves the padding out: no order of that block's 1x1 convs gives torch's values past it,
    convert keeps the one whose run is torch's furthest along and says so; red first at the conv the pool feeds (the
    pools are paired by no order: Paddle runs its own first), every 1x1 conv in its own branch."""
    pt, pd = inception_pair("pool")
    state = convert(pt, pd, inputs=X_INCEPTION)
    pd.eval()
    assert "no order gives torch's values" in state.said and "the farthest along" in state.said, state.said
    assert np.array_equal(pd[1]._conv2.weight.numpy(), pt[1].branch0.weight.detach().numpy())
    report = compare_forward(pt, pd, X_INCEPTION)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and red[0] == "1.branch2.1 (Paddle: 1._conv1)", red


def test_a_plant_in_the_1x3_conv_is_red_at_that_conv():
    """The port's second (1, 3) conv dilated: every order of that block's 1x1 convs parts at it (the two reading the
    block's input hold either way), and only one feeds it torch's input: that one is kept, said, and red there."""
    pt, pd = inception_pair("dilation")
    state = convert(pt, pd, inputs=X_INCEPTION)
    pd.eval()
    assert "and into 1.branch1.1 (the farthest along)" in state.said, state.said
    report = compare_forward(pt, pd, X_INCEPTION)
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and red[0] == "1.branch1.1 (Paddle: 1._conv3_2)", red


# ---------------------------------------------------------------- a tie's window reaching a norm holding its activation

class ViTBlock(torch.nn.Module):
    """MobileViT's order, as timm writes it: a transformer block over the map's pixels, then a 1x1 conv and a norm
    holding its activation (NormAct)."""
    def __init__(self):
        super().__init__()
        self.norm1, self.fc1, self.norm2, self.fc2 = (torch.nn.LayerNorm(4), torch.nn.Linear(4, 4),
                                                      torch.nn.LayerNorm(4), torch.nn.Linear(4, 4))
        self.conv_proj = ConvNorm(4, 4, 1, 1)
        self.conv_proj.bn.act = torch.nn.SiLU()

    def forward(self, x):
        n, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2)
        t = t + self.fc1(self.norm1(t))
        t = t + self.fc2(self.norm2(t))
        return self.conv_proj(t.transpose(1, 2).reshape(n, c, h, w))


class PdViTBlock(paddle.nn.Layer):
    """PaddleClas's: its norms named for what they feed, the conv's norm and activation modules side by side."""
    def __init__(self, eps=1e-5):
        super().__init__()
        self.attn_norm, self.attn, self.mlp_norm, self.mlp = (paddle.nn.LayerNorm(4), paddle.nn.Linear(4, 4),
                                                              paddle.nn.LayerNorm(4), paddle.nn.Linear(4, 4))
        self.conv, self.norm, self.act = (paddle.nn.Conv2D(4, 4, 1, bias_attr=False),
                                          paddle.nn.BatchNorm2D(4, epsilon=eps), paddle.nn.Silu())

    def forward(self, x):
        n, c, h, w = x.shape
        t = x.flatten(2).transpose([0, 2, 1])
        t = t + self.attn(self.attn_norm(t))
        t = t + self.mlp(self.mlp_norm(t))
        return self.act(self.norm(self.conv(t.transpose([0, 2, 1]).reshape([n, c, h, w]))))


def vit_pair(eps=1e-5):
    torch.manual_seed(0)
    paddle.seed(0)
    pt = torch.nn.Sequential(ViTBlock(), ViTBlock())
    with torch.no_grad():
        for m in pt.modules():
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.BatchNorm2d)):
                m.weight.normal_(1, 0.3), m.bias.normal_(0, 0.3)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.3), m.running_var.uniform_(0.01, 2)
    return pt.eval(), paddle.nn.Sequential(PdViTBlock(), PdViTBlock(eps))


def test_a_group_whose_window_holds_a_norm_holding_its_activation_settles_silently_and_green():
    """The norms' window runs to the next block through torch's norm holding its SiLU, against Paddle's norm and the
    Silu after it: read where their outputs meet, the run's order holds and nothing is said."""
    pt, pd = vit_pair()
    state = convert(pt, pd, inputs=X[:, :4])
    pd.eval()
    assert not state.said, state.said
    assert np.array_equal(pd[1].mlp_norm.weight.numpy(), pt[1].norm2.weight.detach().numpy())
    assert compare_forward(pt, pd, X[:, :4], isolate=True).passed


def test_a_plant_in_the_norm_beside_its_activation_is_red_there():
    pt, pd = vit_pair(eps=1e-3)
    convert(pt, pd, inputs=X[:, :4])
    pd.eval()
    report = compare_forward(pt, pd, X[:, :4])
    red = [report.both(r.name) for r in report.paired if not r.passed]
    assert red and red[0].startswith("1.conv_proj.bn"), red
