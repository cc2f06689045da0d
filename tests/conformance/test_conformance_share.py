"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge
sequences, and the admin side, eoslog against Apache Kafka 4.4.

A member's id is its own (the client makes it), so both brokers see the same ids. Kafka hands a
partition out only once its share coordinator has initialized its state, a heartbeat or more after
the member joined; eoslog initializes it within the joining heartbeat: sessions wait (quietly)
until the assignment is there before they record what follows.
"""

from __future__ import annotations

from typing import Any

from conformance.session import Broker, Catalogue, Target, i8, i32, i64, ms
from conformance.steps import batch, call, create_topic, metadata, produce
from eoslog.protocol.messages import build
from eoslog.protocol.share_transactions import TRANSACTIONAL_ACCEPT

CATALOGUE = Catalogue("share")
session = CATALOGUE.session

ALTER_CONFIGS, JOIN_GROUP, OFFSET_COMMIT, DESCRIBE_GROUPS, LIST_GROUPS = 44, 11, 8, 15, 16
HEARTBEAT, DESCRIBE, FETCH, ACK = 76, 77, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS, DELETE_GROUPS = 90, 91, 92, 42
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def group_configs(t: Target, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET of a GROUP resource (``share_auto_offset_reset=...``)."""
    m = t.types(ALTER_CONFIGS, t.v(ALTER_CONFIGS))
    t.quiet_call(build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=(build(
        m.AlterConfigsResource, resource_type=i8(32), resource_name=group, configs=tuple(
            build(m.AlterableConfig, name=k.replace("_", "."), config_operation=i8(0), value=v)
            for k, v in configs.items())),)))


def heartbeat(t: Target, group: str, member: str, epoch: int, topics: tuple[str, ...] | None, *,
              label: str | None = None, record: bool = True) -> Any:
    return call(t, HEARTBEAT, "ShareGroupHeartbeatRequest", label=label, record=record, group_id=group,
                member_id=member, member_epoch=i32(epoch), rack_id=None, subscribed_topic_names=topics)


def joined(t: Target, group: str, member: str, topics: tuple[str, ...], partitions: int) -> Any:
    """Join, then heartbeat (quietly) until the member's assignment names ``partitions`` partitions
    (Kafka's share coordinator initializes them between heartbeats); its epoch and the assignment."""
    state: dict[str, Any] = {"epoch": 0, "assignment": None}

    def beat() -> Any:
        r = heartbeat(t, group, member, state["epoch"], topics, record=False)
        if int(r.error_code) == 0:
            state["epoch"] = int(r.member_epoch)
            if r.assignment is not None:
                state["assignment"] = r.assignment
        return state["assignment"]

    t.until(f"{member}'s assignment", beat,
            lambda a: a is not None and sum(len(tp.partitions) for tp in a.topic_partitions) == partitions)
    return state


def topic_id(t: Target, topic: str) -> Any:
    return next(x.topic_id for x in metadata(t, [topic], record=False).topics if x.name == topic)


def acks(m: Any, *batches: tuple[int, int, tuple[int, ...]]) -> tuple[Any, ...]:
    return tuple(build(m.AcknowledgementBatch, first_offset=i64(first), last_offset=i64(last),
                       acknowledge_types=tuple(i8(k) for k in kinds)) for first, last, kinds in batches)


def share_fetch(t: Target, group: str, member: str, epoch: int, tid: Any, *, partitions: tuple[int, ...] = (0,),
                ack: tuple[tuple[int, int, tuple[int, ...]], ...] = (), wait_ms: int = 5000, max_records: int = 500,
                label: str | None = None, record: bool = True, forget: bool = False) -> Any:
    v = t.v(FETCH, 1)
    m = t.types(FETCH, v)
    topics = (build(m.FetchTopic, topic_id=tid, partitions=tuple(
        build(m.FetchPartition, partition_index=i32(p), partition_max_bytes=i32(1 << 20),
              acknowledgement_batches=acks(m, *ack) if p == partitions[0] else ()) for p in partitions)),)
    forgotten = (build(m.ForgottenTopic, topic_id=tid, partitions=tuple(i32(p) for p in partitions)),) if forget \
        else ()
    return call(t, FETCH, "ShareFetchRequest", version=v, label=label, record=record, group_id=group,
                member_id=member, share_session_epoch=i32(epoch), max_wait=ms(wait_ms), min_bytes=i32(1),
                max_bytes=i32(1 << 20), max_records=i32(max_records), batch_size=i32(max_records),
                topics=() if forget else topics, forgotten_topics_data=forgotten)


def has_records(response: Any) -> bool:
    return any(p.records for x in response.responses for p in x.partitions)


def fetch_until_records(t: Target, group: str, member: str, epoch: int, tid: Any, label: str) -> int:
    """ShareFetch at ``epoch``, then the next epochs, until an answer carries records (under load
    Kafka can answer before records just released are acquirable again), recorded under
    ``label``; the session's next epoch."""
    state = {"epoch": epoch}

    def fetch() -> Any:
        response = share_fetch(t, group, member, state["epoch"], tid, record=False)
        state["epoch"] += 1
        return response

    t.record(label, t.until(label, fetch, has_records))
    return state["epoch"]


def share_ack(t: Target, group: str, member: str, epoch: int, tid: Any, *batches: tuple[int, int, tuple[int, ...]],
              label: str | None = None) -> Any:
    v = t.v(ACK, 1)
    m = t.types(ACK, v)
    return call(t, ACK, "ShareAcknowledgeRequest", version=v, label=label, group_id=group, member_id=member,
                share_session_epoch=i32(epoch), topics=(build(m.AcknowledgeTopic, topic_id=tid, partitions=(
                    build(m.AcknowledgePartition, partition_index=i32(0), acknowledgement_batches=acks(m, *batches)),
                )),))


def describe_offsets(t: Target, group: str, topic: str, label: str) -> Any:
    v = t.v(DESCRIBE_OFFSETS)
    m = t.types(DESCRIBE_OFFSETS, v)
    return call(t, DESCRIBE_OFFSETS, "DescribeShareGroupOffsetsRequest", version=v, label=label, groups=(build(
        m.DescribeShareGroupOffsetsRequestGroup, group_id=group, topics=(build(
            m.DescribeShareGroupOffsetsRequestTopic, topic_name=topic, partitions=(i32(0),)),)),))


def setup(t: Target, topic: str, group: str, records: int, partitions: int = 1) -> Any:
    create_topic(t, topic, partitions)
    group_configs(t, group, share_auto_offset_reset="earliest")
    half = records // 2
    produce(t, topic, 0, batch([f"v{i}".encode() for i in range(half)]), label="produce the first half")
    produce(t, topic, 0, batch([f"v{i}".encode() for i in range(half, records)]), label="produce the second half")
    return topic_id(t, topic)


@session("fetch-acknowledge", "one member: join, ShareFetch (epoch 0) acquires every record, ShareAcknowledge "
         "ACCEPT/RELEASE/REJECT per offset, the released ones fetched again with delivery count 2 and accepted "
         "with the next ShareFetch, nothing more to fetch; DescribeShareGroupOffsets on the way")
def _fetch_acknowledge(t: Target) -> None:
    topic, group, member = "sh-fa", "sh-fa-g", "memberAAAAAAAAAAAAAAAAA"
    tid = setup(t, topic, group, 10)
    joined(t, group, member, (topic,), 1)
    share_fetch(t, group, member, 0, tid, label="fetch epoch 0")
    share_ack(t, group, member, 1, tid, (0, 3, (ACCEPT,)), (4, 5, (RELEASE,)), (6, 7, (REJECT, REJECT)),
              label="acknowledge 0-3 accept, 4-5 release, 6-7 reject")
    describe_offsets(t, group, topic, "offsets after the first acknowledgements")
    epoch = fetch_until_records(t, group, member, 2, tid, "fetch the released ones again")
    share_fetch(t, group, member, epoch, tid, ack=((4, 5, (ACCEPT,)), (8, 9, (ACCEPT,))), wait_ms=200,
                label="accept the rest with the next fetch")
    describe_offsets(t, group, topic, "offsets at the end")
    share_fetch(t, group, member, -1, tid, wait_ms=0, forget=True, label="close the session")
    heartbeat(t, group, member, -1, None, label="leave")


@session("session-errors", "share session epochs and acknowledgement errors: a ShareAcknowledge with epoch 0, "
         "a ShareFetch carrying acknowledgements at epoch 0, a wrong epoch, a member without a session, offsets "
         "not acquired, acknowledge types not matching the range, an acknowledge type that does not exist, eoslog's "
         "transactional accept without its transaction")
def _session_errors(t: Target) -> None:
    topic, group, member = "sh-se", "sh-se-g", "memberBBBBBBBBBBBBBBBBB"
    tid = setup(t, topic, group, 4)
    joined(t, group, member, (topic,), 1)
    share_ack(t, group, member, 0, tid, (0, 0, (ACCEPT,)), label="acknowledge at epoch 0")
    share_fetch(t, group, member, 0, tid, ack=((0, 0, (ACCEPT,)),), wait_ms=0, label="fetch epoch 0 with an ack")
    share_fetch(t, group, member, 0, tid, label="fetch epoch 0")
    share_ack(t, group, member, 7, tid, (0, 0, (ACCEPT,)), label="acknowledge with a wrong epoch")
    share_ack(t, group, "memberNoSessionXXXXXXXX", 1, tid, (0, 0, (ACCEPT,)), label="acknowledge without a session")
    share_ack(t, group, member, 1, tid, (100, 101, (ACCEPT,)), label="acknowledge offsets never acquired")
    share_ack(t, group, member, 2, tid, (0, 2, (ACCEPT, ACCEPT)), label="acknowledge types not matching the range")
    share_ack(t, group, member, 3, tid, (0, 0, (9,)), label="acknowledge type 9")
    # eoslog's TRANSACTIONAL_ACCEPT (protocol/share_transactions.py): refused by Kafka, so a client
    # using the extension against Kafka accepts nothing outside its transaction.
    share_ack(t, group, member, 4, tid, (0, 0, (TRANSACTIONAL_ACCEPT,)),
              label="acknowledge type 100 (eoslog's transactional accept) without a transaction")
    share_ack(t, group, member, 5, tid, (0, 3, (ACCEPT,)), label="acknowledge the four")
    share_ack(t, group, member, 6, tid, (0, 0, (ACCEPT,)), label="acknowledge one already accepted")


@session("heartbeat", "ShareGroupHeartbeat's refusals (an empty member id, a join without topics, an unknown "
         "member, a stale epoch), leaving, ShareGroupDescribe of the group and of an unknown one, ListGroups with "
         "the share type, and what the classic APIs answer for a share group's id")
def _heartbeat(t: Target) -> None:
    topic, group, member = "sh-hb", "sh-hb-g", "memberCCCCCCCCCCCCCCCCC"
    create_topic(t, topic, 2)
    heartbeat(t, group, "", 0, (topic,), label="empty member id")
    heartbeat(t, group, member, 0, None, label="join without topics")
    heartbeat(t, group, member, 5, (topic,), label="unknown member")
    state = joined(t, group, member, (topic,), 2)
    heartbeat(t, group, member, state["epoch"] + 7, None, label="stale epoch")
    # One group per request: Kafka orders a multi-group answer by its coordinator shards' hash map.
    call(t, DESCRIBE, "ShareGroupDescribeRequest", label="describe", group_ids=(group,),
         include_authorized_operations=False)
    call(t, DESCRIBE, "ShareGroupDescribeRequest", label="describe an unknown group", group_ids=("sh-hb-nosuch",),
         include_authorized_operations=False)
    listed = call(t, LIST_GROUPS, "ListGroupsRequest", record=False, states_filter=(), types_filter=("share",))
    t.record("list share groups: this one", [g for g in listed.groups if g.group_id == group])
    classic = call(t, LIST_GROUPS, "ListGroupsRequest", record=False, states_filter=(), types_filter=("classic",))
    t.record("list classic groups: not this one", [g for g in classic.groups if g.group_id == group])
    m = t.types(JOIN_GROUP, t.v(JOIN_GROUP))
    t.call(build(m.JoinGroupRequest, group_id=group, session_timeout=ms(10000), rebalance_timeout=ms(10000),
                 member_id="", group_instance_id=None, protocol_type="consumer", reason=None,
                 protocols=(build(m.JoinGroupRequestProtocol, name="range", metadata=b""),)),
           "classic JoinGroup of the share group")
    call(t, DESCRIBE_GROUPS, "DescribeGroupsRequest", label="DescribeGroups of the share group", groups=(group,),
         include_authorized_operations=False)
    heartbeat(t, group, member, -1, None, label="leave")
    heartbeat(t, group, member, -1, None, label="leave again")


@session("offsets-admin", "AlterShareGroupOffsets of a group with a member (refused) and of an empty one, the "
         "start offset it sets delivered from, DeleteShareGroupOffsets, DeleteGroups of the share group")
def _offsets_admin(t: Target) -> None:
    topic, group, member = "sh-oa", "sh-oa-g", "memberDDDDDDDDDDDDDDDDD"
    tid = setup(t, topic, group, 6)
    joined(t, group, member, (topic,), 1)

    def alter(label: str, offset: int) -> Any:
        m = t.types(ALTER_OFFSETS, t.v(ALTER_OFFSETS))
        return call(t, ALTER_OFFSETS, "AlterShareGroupOffsetsRequest", label=label, group_id=group, topics=(build(
            m.AlterShareGroupOffsetsRequestTopic, topic_name=topic, partitions=(build(
                m.AlterShareGroupOffsetsRequestPartition, partition_index=i32(0), start_offset=i64(offset)),)),))

    alter("alter with a member", 3)
    call(t, DELETE_GROUPS, "DeleteGroupsRequest", label="delete with a member", groups_names=(group,))
    heartbeat(t, group, member, -1, None, record=False)
    t.until("the member gone", lambda: describe_state(t, group), lambda s: s == "Empty")
    alter("alter the empty group", 3)
    describe_offsets(t, group, topic, "offsets after the alter")
    joined(t, group, member, (topic,), 1)
    # Kafka loads the share-partition again after the alter; under load its first ShareFetch can
    # end empty before that is done, so a new session is opened until records come, then recorded.
    def first_records() -> Any:
        r = share_fetch(t, group, member, 0, tid, record=False)
        if not has_records(r):
            share_fetch(t, group, member, -1, tid, wait_ms=0, forget=True, record=False)
        return r

    t.record("fetch from the new start", t.until("records from the new start", first_records, has_records))
    share_fetch(t, group, member, -1, tid, wait_ms=0, forget=True, record=False)
    heartbeat(t, group, member, -1, None, record=False)
    t.until("the member gone", lambda: describe_state(t, group), lambda s: s == "Empty")
    m = t.types(DELETE_OFFSETS, t.v(DELETE_OFFSETS))
    call(t, DELETE_OFFSETS, "DeleteShareGroupOffsetsRequest", label="delete offsets", group_id=group,
         topics=(build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=topic),))
    describe_offsets(t, group, topic, "offsets after the delete")
    call(t, DELETE_GROUPS, "DeleteGroupsRequest", label="delete the group", groups_names=(group,))
    call(t, DESCRIBE, "ShareGroupDescribeRequest", label="describe after the delete", group_ids=(group,),
         include_authorized_operations=False)


def describe_state(t: Target, group: str) -> str:
    r = call(t, DESCRIBE, "ShareGroupDescribeRequest", record=False, group_ids=(group,),
             include_authorized_operations=False)
    return str(r.groups[0].group_state)

