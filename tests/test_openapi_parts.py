"""The OpenAPI document is assembled from the features' parts (each ``api_doc.py``): no path told twice,
and every schema a part names is in the document. Pure: the parts are data."""

from __future__ import annotations

import json
import re

import pytest

from gateway.core.api_doc import ApiDoc
from gateway.transports.openapi import PARTS, openapi_document


def test_a_path_two_parts_describe_stops_the_document() -> None:
    again = ApiDoc(lambda: {"/health": {"get": {"responses": {}}}})
    with pytest.raises(ValueError, match="/health is described twice"):
        openapi_document(parts=(*PARTS, again))


def test_every_schema_a_part_names_is_in_the_document() -> None:
    document = openapi_document()
    named = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert named and named <= set(document["components"]["schemas"])


def test_each_part_adds_its_own_paths_in_order() -> None:
    paths = list(openapi_document()["paths"])
    assert paths == [path for part in PARTS for path in part.paths()]
