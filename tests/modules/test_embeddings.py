import torch

from fconv_plugin.modules.embeddings import LearnedPositionalEmbedding, make_positions

PAD = 1


def test_positions_count_real_tokens_from_padding_idx_plus_one():
    tokens = torch.tensor([[PAD, PAD, 7, 8, 2], [5, 6, 7, 8, 2], [5, 2, PAD, PAD, PAD]])
    assert make_positions(tokens, PAD).tolist() == [
        [1, 1, 2, 3, 4],
        [2, 3, 4, 5, 6],
        [2, 3, 1, 1, 1],
    ]


def test_position_embedding_does_not_depend_on_the_padding_side():
    embedding = LearnedPositionalEmbedding(16, 4, PAD)
    left = torch.tensor([[PAD, PAD, 9, 4, 2]])
    right = torch.tensor([[9, 4, 2, PAD, PAD]])
    assert torch.equal(embedding(left)[0, 2:], embedding(right)[0, :3])
    assert torch.count_nonzero(embedding(left)[0, :2]) == 0


def test_table_rows_and_usable_length_follow_fairseq():
    embedding = LearnedPositionalEmbedding(1024, 4, PAD)
    assert embedding.weight.shape == (1024, 4)
    assert embedding.max_positions == 1024 - PAD - 1


def test_last_step_only_gives_the_position_of_the_newest_token():
    embedding = LearnedPositionalEmbedding(16, 4, PAD)
    tokens = torch.tensor([[2, 5, 6], [2, 7, 8]])
    assert torch.equal(embedding(tokens, last_step_only=True), embedding(tokens)[:, -1:])
