"""ViTs on both sides, tiny: a timm-style one (torch), its port written PaddleClas's way (the class token and the
position table are parameters of the model itself, paddle.nn.Linear) and as PaConvert 3.3.1 writes it
(paddle.compat.nn.Linear); a transformers-style ViT and CLIP vision tower (torch), whose `embeddings` container holds
the class token and position table, against ports holding them on the model itself.

Each Paddle class takes plant=: a bug a port could hold, named by the module a comparison must call red."""
import numpy as np
import paddle
import torch
import torch.nn.functional as F

IMG, PATCH, DIM, HEADS, DEPTH, CLASSES = 16, 4, 32, 4, 2, 10
PATCHES = (IMG // PATCH) ** 2
PIXELS = np.random.RandomState(0).randn(2, 3, IMG, IMG).astype("float32")


# ---------------------------------------------------------------- timm's layout (torch)

class PatchEmbed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.qkv = torch.nn.Linear(DIM, DIM * 3)
        self.proj = torch.nn.Linear(DIM, DIM)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, HEADS, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = torch.nn.Linear(DIM, 2 * DIM), torch.nn.GELU(), torch.nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn = torch.nn.LayerNorm(DIM, eps=1e-6), Attention()
        self.norm2, self.mlp = torch.nn.LayerNorm(DIM, eps=1e-6), Mlp()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = PatchEmbed()
        self.cls_token = torch.nn.Parameter(torch.randn(1, 1, DIM) * 0.02)
        self.pos_embed = torch.nn.Parameter(torch.randn(1, PATCHES + 1, DIM) * 0.02)
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(DEPTH)])
        self.norm = torch.nn.LayerNorm(DIM, eps=1e-6)
        self.head = torch.nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


# ---------------------------------------------------------------- PaddleClas's layout (Paddle)

class PaddleClasAttention(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.head_dim, self.plant = DIM // HEADS, plant
        self.scale = self.head_dim ** -0.5
        self.qkv = paddle.nn.Linear(DIM, DIM * 3)
        self.proj = paddle.nn.Linear(DIM, DIM)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape((B, N, 3, HEADS, self.head_dim)).transpose((2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        scale = self.scale * (1.1 if self.plant == "scale" else 1.0)
        attn = paddle.nn.functional.softmax(q.matmul(k.transpose((0, 1, 3, 2))) * scale, axis=-1)
        return self.proj(attn.matmul(v).transpose((0, 2, 1, 3)).reshape((B, N, C)))


class PaddleClasMlp(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.fc1, self.fc2 = paddle.nn.Linear(DIM, 2 * DIM), paddle.nn.Linear(2 * DIM, DIM)
        self.act = paddle.nn.ReLU() if plant == "relu" else paddle.nn.GELU()

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class PaddleClasBlock(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.norm1 = paddle.nn.LayerNorm(DIM, epsilon=1e-5 if plant == "eps" else 1e-6)
        self.attn = PaddleClasAttention(plant)
        self.norm2 = paddle.nn.LayerNorm(DIM, epsilon=1e-6)
        self.mlp = PaddleClasMlp(plant)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PaddleClasPatchEmbed(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.proj = paddle.nn.Conv2D(3, DIM, kernel_size=PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose((0, 2, 1))


class PaddleClasViT(paddle.nn.Layer):
    """plant: "pos" (the position table added from its second row: the class token's row skipped), "scale" (the
    attention's scale off in every block), "relu" (the MLP's GELU as ReLU), "eps" (norm1's epsilon 1e-5)."""
    def __init__(self, plant=None):
        super().__init__()
        self.plant = plant
        self.patch_embed = PaddleClasPatchEmbed()
        zeros = paddle.nn.initializer.Constant(0.0)
        self.pos_embed = self.create_parameter(shape=(1, PATCHES + 1, DIM), default_initializer=zeros)
        self.cls_token = self.create_parameter(shape=(1, 1, DIM), default_initializer=zeros)
        self.blocks = paddle.nn.LayerList([PaddleClasBlock(plant if plant != "eps" or i == 1 else None)
                                           for i in range(DEPTH)])
        self.norm = paddle.nn.LayerNorm(DIM, epsilon=1e-6)
        self.head = paddle.nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = paddle.concat([self.cls_token.expand((x.shape[0], -1, -1)), x], axis=1)
        pos = paddle.concat([self.pos_embed[:, 1:2], self.pos_embed[:, 1:]], axis=1) if self.plant == "pos" \
            else self.pos_embed
        x = x + pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


# ---------------------------------------------------------------- PaConvert 3.3.1's output (Paddle), as it writes it

class PaConvertPatchEmbed(paddle.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = paddle.nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class PaConvertAttention(paddle.nn.Module):
    def __init__(self, plant=None):
        super().__init__()
        self.head_dim, self.plant = DIM // HEADS, plant
        self.qkv = paddle.compat.nn.Linear(DIM, DIM * 3, bias=True)
        self.proj = paddle.compat.nn.Linear(DIM, DIM)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, HEADS, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.plant == "kq":  # q and k swapped: the scores transposed
            q, k = k, q
        x = paddle.compat.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class PaConvertMlp(paddle.nn.Module):
    def __init__(self, plant=None):
        super().__init__()
        self.fc1 = paddle.compat.nn.Linear(DIM, 2 * DIM)
        self.act = paddle.nn.GELU(approximate=plant == "tanh")
        self.fc2 = paddle.compat.nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class PaConvertBlock(paddle.nn.Module):
    def __init__(self, plant=None):
        super().__init__()
        self.norm1 = paddle.nn.LayerNorm(DIM, eps=1e-06)
        self.attn = PaConvertAttention(plant)
        self.norm2 = paddle.nn.LayerNorm(DIM, eps=1e-06)
        self.mlp = PaConvertMlp(plant)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PaConvertViT(paddle.nn.Module):
    """plant: "kq" (q and k swapped in the attention), "tanh" (the MLP's GELU approximated by tanh)."""
    def __init__(self, plant=None):
        super().__init__()
        self.patch_embed = PaConvertPatchEmbed()
        self.cls_token = paddle.nn.Parameter(paddle.zeros(1, 1, DIM))
        self.pos_embed = paddle.nn.Parameter(paddle.randn(1, PATCHES + 1, DIM) * 0.02)
        self.blocks = paddle.nn.Sequential(*[PaConvertBlock(plant) for _ in range(DEPTH)])
        self.norm = paddle.nn.LayerNorm(DIM, eps=1e-06)
        self.head = paddle.compat.nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = paddle.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos_embed
        x = self.blocks(x)
        x = self.norm(x)
        return self.head(x[:, 0])


# ---------------------------------------------------------------- transformers' layout (torch): tables in `embeddings`

class ViTPatchEmbeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.projection = torch.nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class ViTEmbeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = torch.nn.Parameter(torch.randn(1, 1, DIM) * 0.02)
        self.patch_embeddings = ViTPatchEmbeddings()
        self.position_embeddings = torch.nn.Parameter(torch.randn(1, PATCHES + 1, DIM) * 0.02)

    def forward(self, pixel_values):
        embeddings = self.patch_embeddings(pixel_values)
        cls_tokens = self.cls_token.expand(embeddings.shape[0], -1, -1)
        return torch.cat((cls_tokens, embeddings), dim=1) + self.position_embeddings


class ViTSelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value = (torch.nn.Linear(DIM, DIM) for _ in range(3))

    def forward(self, hidden_states):
        B, N, _ = hidden_states.shape
        split = lambda x: x.view(B, N, HEADS, DIM // HEADS).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.query(hidden_states)), split(self.key(hidden_states)), split(self.value(hidden_states))
        scores = torch.softmax(q @ k.transpose(-1, -2) / (DIM // HEADS) ** 0.5, dim=-1)
        return (scores @ v).transpose(1, 2).reshape(B, N, DIM)


class ViTSelfOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(DIM, DIM)

    def forward(self, hidden_states):
        return self.dense(hidden_states)


class ViTAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention, self.output = ViTSelfAttention(), ViTSelfOutput()

    def forward(self, hidden_states):
        return self.output(self.attention(hidden_states))


class ViTIntermediate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(DIM, 2 * DIM)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class ViTOutput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = torch.nn.Linear(2 * DIM, DIM)

    def forward(self, hidden_states, input_tensor):
        return self.dense(hidden_states) + input_tensor


class ViTLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention, self.intermediate, self.output = ViTAttention(), ViTIntermediate(), ViTOutput()
        self.layernorm_before = torch.nn.LayerNorm(DIM, eps=1e-12)
        self.layernorm_after = torch.nn.LayerNorm(DIM, eps=1e-12)

    def forward(self, hidden_states):
        hidden_states = self.attention(self.layernorm_before(hidden_states)) + hidden_states
        return self.output(self.intermediate(self.layernorm_after(hidden_states)), hidden_states)


class ViTEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.ModuleList([ViTLayer() for _ in range(DEPTH)])

    def forward(self, hidden_states):
        for layer in self.layer:
            hidden_states = layer(hidden_states)
        return hidden_states


class ViTForImageClassification(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings, self.encoder = ViTEmbeddings(), ViTEncoder()
        self.layernorm = torch.nn.LayerNorm(DIM, eps=1e-12)
        self.classifier = torch.nn.Linear(DIM, CLASSES)

    def forward(self, pixel_values):
        return self.classifier(self.layernorm(self.encoder(self.embeddings(pixel_values)))[:, 0])


# ---------------------------------------------------------------- its port: the tables on the model (Paddle)

class PortAttention(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.q, self.k, self.v, self.out = (paddle.nn.Linear(DIM, DIM) for _ in range(4))
        self.plant = plant

    def forward(self, x):
        B, N, _ = x.shape
        split = lambda t: t.reshape((B, N, HEADS, DIM // HEADS)).transpose((0, 2, 1, 3))  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = paddle.nn.functional.softmax(q.matmul(k, transpose_y=True) / (DIM // HEADS) ** 0.5, axis=-1)
        if self.plant == "softmax":  # the scores normalised over the queries
            scores = paddle.nn.functional.softmax(q.matmul(k, transpose_y=True) / (DIM // HEADS) ** 0.5, axis=-2)
        return self.out(scores.matmul(v).transpose((0, 2, 1, 3)).reshape((B, N, DIM)))


class PortLayer(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.norm1, self.attn = paddle.nn.LayerNorm(DIM, epsilon=1e-12), PortAttention(plant)
        self.norm2 = paddle.nn.LayerNorm(DIM, epsilon=1e-12)
        self.fc1, self.fc2 = paddle.nn.Linear(DIM, 2 * DIM), paddle.nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        x = self.attn(self.norm1(x)) + x
        return self.fc2(paddle.nn.functional.gelu(self.fc1(self.norm2(x)))) + x


class PortOfViT(paddle.nn.Layer):
    """transformers' ViT ported with its tables on the model, PaddleClas's way. plant: "cls" (the class token added
    to every position), "softmax" (the attention normalised over the queries)."""
    def __init__(self, plant=None):
        super().__init__()
        self.plant = plant
        self.cls_token = self.create_parameter(shape=(1, 1, DIM))
        self.pos_embed = self.create_parameter(shape=(1, PATCHES + 1, DIM))
        self.patch_embed = PaddleClasPatchEmbed()
        self.blocks = paddle.nn.LayerList([PortLayer(plant) for _ in range(DEPTH)])
        self.norm = paddle.nn.LayerNorm(DIM, epsilon=1e-12)
        self.head = paddle.nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch_embed(x)
        x = paddle.concat([self.cls_token.expand((x.shape[0], -1, -1)), x], axis=1) + self.pos_embed
        if self.plant == "cls":
            x = x + self.cls_token
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


# ---------------------------------------------------------------- transformers' CLIP vision tower (torch)

def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


class CLIPVisionEmbeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.class_embedding = torch.nn.Parameter(torch.randn(DIM))
        self.patch_embedding = torch.nn.Conv2d(3, DIM, kernel_size=PATCH, stride=PATCH, bias=False)
        self.position_embedding = torch.nn.Embedding(PATCHES + 1, DIM)
        self.register_buffer("position_ids", torch.arange(PATCHES + 1).expand((1, -1)), persistent=False)

    def forward(self, pixel_values):
        patches = self.patch_embedding(pixel_values).flatten(2).transpose(1, 2)
        class_embeds = self.class_embedding.expand(pixel_values.shape[0], 1, -1)
        return torch.cat([class_embeds, patches], dim=1) + self.position_embedding(self.position_ids)


class CLIPAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (torch.nn.Linear(DIM, DIM) for _ in range(4))

    def forward(self, hidden_states):
        B, N, _ = hidden_states.shape
        split = lambda x: x.view(B, N, HEADS, DIM // HEADS).transpose(1, 2)  # noqa: E731
        q = split(self.q_proj(hidden_states))
        k, v = split(self.k_proj(hidden_states)), split(self.v_proj(hidden_states))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(B, N, DIM))


class CLIPMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(DIM, 2 * DIM), torch.nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        return self.fc2(quick_gelu(self.fc1(x)))


class CLIPEncoderLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.layer_norm1 = CLIPAttention(), torch.nn.LayerNorm(DIM)
        self.mlp, self.layer_norm2 = CLIPMLP(), torch.nn.LayerNorm(DIM)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class CLIPEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([CLIPEncoderLayer() for _ in range(DEPTH)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class CLIPVisionTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = CLIPVisionEmbeddings()
        self.pre_layrnorm = torch.nn.LayerNorm(DIM)
        self.encoder = CLIPEncoder()
        self.post_layernorm = torch.nn.LayerNorm(DIM)

    def forward(self, pixel_values):
        last = self.encoder(self.pre_layrnorm(self.embeddings(pixel_values)))
        return last, self.post_layernorm(last[:, 0])


# ---------------------------------------------------------------- its port: class_embedding on the tower (Paddle)

class PortCLIPAttention(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (paddle.nn.Linear(DIM, DIM) for _ in range(4))

    def forward(self, x):
        B, N, _ = x.shape
        split = lambda t: t.reshape((B, N, HEADS, DIM // HEADS)).transpose((0, 2, 1, 3))  # noqa: E731
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = paddle.nn.functional.softmax(q.matmul(k, transpose_y=True) / (DIM // HEADS) ** 0.5, axis=-1)
        return self.out_proj(scores.matmul(v).transpose((0, 2, 1, 3)).reshape((B, N, DIM)))


class ResidualAttentionBlock(paddle.nn.Layer):
    def __init__(self, plant=None):
        super().__init__()
        self.ln_1, self.attn = paddle.nn.LayerNorm(DIM), PortCLIPAttention()
        self.ln_2 = paddle.nn.LayerNorm(DIM)
        self.c_fc, self.c_proj = paddle.nn.Linear(DIM, 2 * DIM), paddle.nn.Linear(2 * DIM, DIM)
        self.plant = plant

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        h = self.c_fc(self.ln_2(x))
        h = paddle.nn.functional.gelu(h) if self.plant == "gelu" else h * paddle.nn.functional.sigmoid(1.702 * h)
        return x + self.c_proj(h)


class PortCLIPVision(paddle.nn.Layer):
    """paddlenlp's habit: the class embedding a parameter of the tower itself. plant: "class" (the class embedding
    added to the patches too), "gelu" (the MLP's quick GELU as GELU)."""
    def __init__(self, plant=None):
        super().__init__()
        self.plant = plant
        self.class_embedding = self.create_parameter((DIM,))
        self.conv1 = paddle.nn.Conv2D(3, DIM, kernel_size=PATCH, stride=PATCH, bias_attr=False)
        self.positional_embedding = paddle.nn.Embedding(PATCHES + 1, DIM)
        self.ln_pre = paddle.nn.LayerNorm(DIM)
        self.resblocks = paddle.nn.LayerList([ResidualAttentionBlock(plant) for _ in range(DEPTH)])
        self.ln_post = paddle.nn.LayerNorm(DIM)

    def forward(self, pixel_values):
        x = self.conv1(pixel_values).flatten(2).transpose((0, 2, 1))
        if self.plant == "class":
            x = x + self.class_embedding
        x = paddle.concat([self.class_embedding.expand((x.shape[0], 1, DIM)), x], axis=1)
        x = self.ln_pre(x + self.positional_embedding(paddle.arange(PATCHES + 1)))
        for block in self.resblocks:
            x = block(x)
        return x, self.ln_post(x[:, 0])
