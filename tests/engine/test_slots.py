from whiz.engine.slots import SlotTable, common_prefix, shifted_chunks


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix(list(range(1000)), list(range(1000))) == 1000
    assert common_prefix(list(range(600)) + [7], list(range(600)) + [8]) == 600
    assert common_prefix([], [1]) == 0


def test_a_continued_conversation_returns_to_its_slot():
    table = SlotTable(3)
    table.slots[1].tokens = [1, 2, 3]
    p = table.place([1, 2, 3, 4, 5], None, need_logits=True)
    assert p.slot.seq == 1 and p.keep == 3 and p.donor is None


def test_a_shared_prefix_is_copied_into_a_free_slot_not_taken_over():
    table = SlotTable(3)
    table.slots[0].tokens = [9, 9, 9, 1, 1]  # another conversation with the same system prompt
    p = table.place([9, 9, 9, 2], None, need_logits=True)
    assert p.slot.seq != 0
    assert p.donor is table.slots[0] and p.keep == 3


def test_keeps_one_prompt_token_to_decode_when_logits_are_needed():
    table = SlotTable(1)
    table.slots[0].tokens = [1, 2, 3]
    assert table.place([1, 2, 3], None, need_logits=True).keep == 2
    assert table.place([1, 2, 3], None, need_logits=False).keep == 3


def test_all_busy_means_wait_and_lru_is_evicted_first():
    table = SlotTable(2)
    for s in table.slots:
        s.busy = True
    assert table.place([1], None, need_logits=True) is None
    for i, s in enumerate(table.slots):
        s.busy = False
        s.tokens = [i + 10]
    table.touch(table.slots[1])
    table.touch(table.slots[0])
    assert table.evictable() is table.slots[1]


def test_candidates_take_the_empty_slots_next_to_their_leader():
    # llama.cpp decodes consecutive sequences in one pass; scattered ones take a pass each.
    table = SlotTable(8)
    leader = table.slots[3]
    leader.tokens, leader.busy = [5, 6, 7], True
    taken = []
    for _ in range(4):
        p = table.place([5, 6, 7], None, need_logits=True, near=leader.seq)
        p.slot.busy = True
        taken.append(p.slot.seq)
    assert sorted(taken + [3]) == [1, 2, 3, 4, 5]


def test_with_every_slot_warm_candidates_still_sit_next_to_their_leader():
    table = SlotTable(8)
    for slot in table.slots:
        slot.tokens = [slot.seq + 100]
        table.touch(slot)
    leader = table.slots[5]
    leader.busy = True
    taken = []
    for _ in range(2):
        p = table.place([1, 2], None, need_logits=True, near=leader.seq)
        p.slot.busy = True
        taken.append(p.slot.seq)
    assert sorted(taken) == [4, 6]
    # Without a leader, recency still decides: the least recently used slot goes first.
    assert table.place([1, 2], None, need_logits=True).slot.seq == 0


def test_chunks_that_moved_back_are_reused_past_a_deletion():
    cached = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    prompt = [1, 2, 6, 7, 8, 9, 10, 11]  # 3, 4, 5 deleted, 11 typed
    moves, cached_n = shifted_chunks(cached, prompt, 2, 3)
    assert moves == [(5, 2, 5)] and cached_n == 7
    assert shifted_chunks(cached, prompt, 2, 6) == ([], 2)  # the chunk is shorter than asked
    assert shifted_chunks(cached, prompt, 2, 0) == ([], 2)


def test_reuse_stops_at_text_inserted_in_the_middle():
    cached = [1, 2, 3, 4, 5, 6, 7, 8]
    prompt = [1, 2, 3, 99, 4, 5, 6, 7, 8]  # llama.cpp decodes only after a sequence's last cell
    assert shifted_chunks(cached, prompt, 3, 2) == ([], 3)


def test_a_placement_shifts_the_slots_chunks_only_when_asked():
    table = SlotTable(2)
    table.slots[0].tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    table.slots[0].session = "editor"
    prompt = [1, 2, 6, 7, 8, 9, 10]
    plain = table.place(prompt, "editor", need_logits=True)
    assert plain.keep == 2 and plain.moves == ()
    shifted = table.place(prompt, "editor", need_logits=True, reuse_chunk=3)
    # The last prompt token is decoded again for its logits, so the chunk is cut before it.
    assert shifted.slot.seq == 0 and shifted.keep == 6 and shifted.moves == ((5, 2, 4),)
