"""kio's request classes of every version a handler serves, as one type per API: a handler
typed with it has each field it reads checked against every version (a field some versions
lack is read with ``getattr`` and a default)."""

from __future__ import annotations

from kio.schema.fetch.v4.request import FetchRequest as _FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as _FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as _FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as _FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as _FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as _FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as _FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as _FetchRequestV11
from kio.schema.fetch.v12.request import FetchRequest as _FetchRequestV12
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as _ListOffsetsRequestV1
from kio.schema.list_offsets.v2.request import ListOffsetsRequest as _ListOffsetsRequestV2
from kio.schema.list_offsets.v3.request import ListOffsetsRequest as _ListOffsetsRequestV3
from kio.schema.list_offsets.v4.request import ListOffsetsRequest as _ListOffsetsRequestV4
from kio.schema.list_offsets.v5.request import ListOffsetsRequest as _ListOffsetsRequestV5
from kio.schema.list_offsets.v6.request import ListOffsetsRequest as _ListOffsetsRequestV6
from kio.schema.list_offsets.v7.request import ListOffsetsRequest as _ListOffsetsRequestV7
from kio.schema.produce.v3.request import ProduceRequest as _ProduceRequestV3
from kio.schema.produce.v4.request import ProduceRequest as _ProduceRequestV4
from kio.schema.produce.v5.request import ProduceRequest as _ProduceRequestV5
from kio.schema.produce.v6.request import ProduceRequest as _ProduceRequestV6
from kio.schema.produce.v7.request import ProduceRequest as _ProduceRequestV7
from kio.schema.produce.v8.request import ProduceRequest as _ProduceRequestV8
from kio.schema.produce.v9.request import ProduceRequest as _ProduceRequestV9
from kio.schema.produce.v10.request import ProduceRequest as _ProduceRequestV10
from kio.schema.produce.v11.request import ProduceRequest as _ProduceRequestV11

ProduceRequest = (
    _ProduceRequestV3 | _ProduceRequestV4 | _ProduceRequestV5 | _ProduceRequestV6 | _ProduceRequestV7
    | _ProduceRequestV8 | _ProduceRequestV9 | _ProduceRequestV10 | _ProduceRequestV11
)
FetchRequest = (
    _FetchRequestV4 | _FetchRequestV5 | _FetchRequestV6 | _FetchRequestV7 | _FetchRequestV8 | _FetchRequestV9
    | _FetchRequestV10 | _FetchRequestV11 | _FetchRequestV12
)
ListOffsetsRequest = (
    _ListOffsetsRequestV1 | _ListOffsetsRequestV2 | _ListOffsetsRequestV3 | _ListOffsetsRequestV4
    | _ListOffsetsRequestV5 | _ListOffsetsRequestV6 | _ListOffsetsRequestV7
)
